"""The command line as a user meets it: tasks, events, replay, each with tables and --json."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from store import EventStore
from store.events import (
    NOTIFICATIONS_STREAM,
    AdmittedNotification,
    ArtifactRead,
    JobFinished,
    JobStarted,
    ModelCalled,
    NotificationEnqueued,
    NotificationsAdmitted,
    TaskPhase,
    TaskPhaseChanged,
)
from store.migrate import head_revision


def submit(agentd, goal: str, *extra: str) -> str:
    result = agentd("task", "submit", goal, *extra)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_every_command_has_help(agentd) -> None:
    for args in (
        [], ["task"], ["task", "submit"], ["task", "list"], ["task", "show"], ["task", "cancel"], ["events"],
        ["events", "list"], ["events", "tail"], ["events", "export"], ["events", "import"], ["replay"],
        ["db", "upgrade"], ["db", "check"], ["serve"], ["model", "path"], ["task", "run"], ["approvals"],
        ["approvals", "list"], ["approvals", "approve"], ["approvals", "deny"],
    ):
        result = agentd(*args, "--help")
        assert result.returncode == 0 and "Usage: agentd" in result.stdout, (args, result.stderr)


@pytest.mark.parametrize(
    ("args", "where"),
    [
        (["statu"], "agentd"),
        (["task", "show"], "agentd task show"),
        (["eval", "tasks"], "agentd eval tasks"),
        (["eval", "generate", "--seed", "1", "--count", "0", "-o", "x"], "agentd eval generate"),
        (["events", "list", "--bogus"], "agentd events list"),
    ],
)
def test_a_usage_error_of_any_command_is_one_line_naming_where_help_is(agentd, args: list[str], where: str) -> None:
    result = agentd(*args)
    assert result.returncode == 2 and result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("agentd: "), result.stderr
    assert lines[0].endswith(f"(see `{where} --help`)")


def test_submit_list_show_and_cancel_a_task(agentd) -> None:
    task_id = submit(agentd, "write the release notes")
    assert task_id.startswith("t-")
    listed = agentd("task", "list")
    assert task_id in listed.stdout and "write the release notes" in listed.stdout and "submitted" in listed.stdout
    as_json = json.loads(agentd("task", "list", "--json").stdout)
    assert [(t["task_id"], t["phase"]) for t in as_json] == [(task_id, "submitted")]
    assert agentd("task", "cancel", task_id).returncode == 0
    shown = json.loads(agentd("task", "show", task_id, "--json").stdout)
    assert shown["summary"]["phase"] == "cancelled" and shown["summary"]["finished_at"]
    assert "phase        cancelled" in agentd("task", "show", task_id).stdout


def test_task_show_at_a_seq_shows_the_state_back_then(agentd, isolated: Path) -> None:
    task_id = submit(agentd, "goal")
    with EventStore(f"sqlite:///{isolated / '.agentd' / 'agentd.db'}") as store:
        store.append(task_id, [TaskPhaseChanged(phase=TaskPhase.RUNNING)])
        store.append(task_id, [ArtifactRead(path="a.txt", sha256="d" * 64, size=4)])
        store.append(task_id, [ModelCalled(call_index=1, model="m", prompt_tokens=10, completion_tokens=5)])
    at_2 = json.loads(agentd("task", "show", task_id, "--at", "2", "--json").stdout)
    assert at_2["summary"]["phase"] == "running" and at_2["artifacts"] == []
    now = json.loads(agentd("task", "show", task_id, "--json").stdout)
    assert now["summary"]["steps"] == 1 and now["artifacts"][0]["path"] == "a.txt"
    until = agentd("replay", "--until", "1")
    assert until.returncode == 0 and "submitted" in until.stdout and "running" not in until.stdout


def test_task_show_at_and_replay_until_show_the_queue_and_jobs_back_then(agentd, isolated: Path) -> None:
    task_id = submit(agentd, "goal")
    with EventStore(f"sqlite:///{isolated / '.agentd' / 'agentd.db'}") as store:
        store.append(task_id, [JobStarted(job_id="j-00000001", call_id="c1", command="make check")])  # 2
        store.append(NOTIFICATIONS_STREAM, [NotificationEnqueued(  # 3
            notification_id="n-1", source="operator", kind="note", tasks=(task_id,), text="the build is green",
        )])
        store.append(task_id, [NotificationsAdmitted(call_index=1, items=(AdmittedNotification(  # 4
            notification_id="n-1", source="operator", kind="note", text="the build is green",
        ),))])
        store.append(task_id, [JobFinished(job_id="j-00000001", exit_code=0)])  # 5
    at_3 = json.loads(agentd("task", "show", task_id, "--at", "3", "--json").stdout)
    assert [(n["notification_id"], n["admitted_call"]) for n in at_3["notifications"]] == [("n-1", None)]
    assert [(j["job_id"], j["finished_seq"]) for j in at_3["jobs"]] == [("j-00000001", None)]
    table = agentd("task", "show", task_id, "--at", "3").stdout
    assert "the build is green" in table and "waiting" in table and "running" in table
    now = json.loads(agentd("task", "show", task_id, "--json").stdout)
    assert [(n["notification_id"], n["admitted_call"]) for n in now["notifications"]] == [("n-1", 1)]
    assert [(j["job_id"], j["exit_code"], j["finished_seq"]) for j in now["jobs"]] == [("j-00000001", 0, 5)]
    assert "request 1" in agentd("task", "show", task_id).stdout
    until = json.loads(agentd("replay", "--until", "3", "--json").stdout)
    assert [n["notification_id"] for n in until["notifications"][task_id]] == ["n-1"]
    assert until["jobs"][task_id][0]["finished_seq"] is None
    lines = agentd("replay", "--until", "3").stdout.splitlines()
    assert lines[1].split()[:5] == ["ID", "PHASE", "STEPS", "QUEUED", "JOBS"]
    assert lines[2].split()[:5] == [task_id, "submitted", "0", "1", "1"]


def test_events_list_filters_by_task_and_type(agentd) -> None:
    first = submit(agentd, "one")
    second = submit(agentd, "two")
    agentd("task", "cancel", second)
    by_task = agentd("events", "list", "--task", second, "--json").stdout.splitlines()
    assert [json.loads(line)["type"] for line in by_task] == ["TaskSubmitted", "TaskPhaseChanged"]
    by_type = agentd("events", "list", "--type", "TaskSubmitted", "--json").stdout.splitlines()
    assert [json.loads(line)["stream_id"] for line in by_type] == [first, second]
    table = agentd("events", "list").stdout
    assert table.splitlines()[0].split()[:3] == ["SEQ", "RECORDED", "(UTC)"] and "TaskPhaseChanged" in table
    last_one = agentd("events", "list", "--limit", "1", "--json").stdout.splitlines()
    assert [json.loads(line)["seq"] for line in last_one] == [3]


def test_events_tail_prints_new_events_as_they_are_recorded(agentd, isolated: Path) -> None:
    submit(agentd, "before")
    tail = subprocess.Popen(
        [sys.executable, "-m", "runtime.cli", "events", "tail", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert json.loads(tail.stdout.readline())["payload"]["goal"] == "before"
        submit(agentd, "after")
        deadline = time.monotonic() + 20
        line = tail.stdout.readline()
        assert time.monotonic() < deadline
        assert json.loads(line)["payload"]["goal"] == "after"
    finally:
        tail.send_signal(signal.SIGINT)
        tail.wait(timeout=10)
    assert tail.returncode == 0


def test_replay_passes_on_an_untouched_store(agentd) -> None:
    for goal in ("a", "b", "c"):
        submit(agentd, goal)
    result = agentd("replay")
    assert result.returncode == 0
    assert "from 3 events" in result.stdout and "match" in result.stdout


def test_replay_names_the_first_difference_when_a_projection_was_tampered_with(agentd, isolated: Path) -> None:
    task_id = submit(agentd, "a")
    conn = sqlite3.connect(isolated / ".agentd" / "agentd.db")
    with conn:
        conn.execute("UPDATE tasks SET phase = 'completed'")
    conn.close()
    result = agentd("replay")
    assert result.returncode != 0
    assert result.stderr.strip() == (
        f"agentd: projections disagree with the log: table tasks, row task_id='{task_id}', "
        "column phase: live 'completed', rebuilt 'submitted'"
    )


def test_replay_notices_a_projection_row_the_log_does_not_explain(agentd, isolated: Path) -> None:
    submit(agentd, "a")
    conn = sqlite3.connect(isolated / ".agentd" / "agentd.db")
    with conn:
        conn.execute(
            "INSERT INTO tasks VALUES ('t-ghost','g','/w','default','running',1,1,0,0,NULL,'x','x',NULL,1,1)"
        )
    conn.close()
    result = agentd("replay")
    assert result.returncode != 0
    assert "table tasks" in result.stderr and "t-ghost" in result.stderr and "live" in result.stderr


def test_db_upgrade_and_check(agentd) -> None:
    upgraded = agentd("db", "upgrade")
    assert upgraded.returncode == 0 and f"revision {head_revision()}" in upgraded.stdout
    checked = agentd("db", "check")
    assert checked.returncode == 0 and checked.stdout.strip() == "ok"


def test_model_path_finds_the_configured_gguf(agentd) -> None:
    result = agentd("model", "path", env={"AGENTD_MODEL": "smollm2-135m"})
    assert result.returncode == 0, result.stderr
    path = Path(result.stdout.strip())
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert path.read_bytes()[:4] == b"GGUF"
