"""agentd serve as a user runs it: it picks up submitted tasks, runs them on the model, stops on SIGTERM."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import approvals, free_port, serving, show, wait_until


@pytest.mark.slow
def test_serve_runs_a_submitted_task_to_its_end_and_exits_cleanly_on_sigterm(agentd, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("The release is planned for March 3.\n")
    env = {"AGENTD_DATA_DIR": str(tmp_path / "data"), "AGENTD_WORKSPACE": str(ws), "AGENTD_MODEL": "smollm2-135m"}
    submitted = agentd("task", "submit", "--max-steps", "3", "When is the release? Read notes.txt.", env=env)
    assert submitted.returncode == 0, submitted.stderr
    task_id = submitted.stdout.strip()
    server = subprocess.Popen(
        [sys.executable, "-m", "runtime.cli", "serve", "--port", str(free_port())],
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 240
        phase = "submitted"
        while time.monotonic() < deadline:
            shown = agentd("task", "show", task_id, "--json", env=env)
            phase = json.loads(shown.stdout)["summary"]["phase"] if shown.returncode == 0 else phase
            if phase in ("completed", "failed", "awaiting_approval"):
                break
            time.sleep(1)
        assert phase in ("completed", "failed", "awaiting_approval"), f"task still {phase}"
        calls = json.loads(agentd("task", "show", task_id, "--calls", "--json", env=env).stdout)
        assert calls and all(c["prompt_tokens"] > 0 for c in calls)
    finally:
        server.send_signal(signal.SIGTERM)
        out, err = server.communicate(timeout=60)
    assert server.returncode == 0, err[-2000:]
    assert "web page:" in out


# A step that keeps a scripted task busy: a new file each time, which neither the watcher (the task's own
# write) nor the task's known paths (write_file names any path) make anything of.
FILLER = {"action": "call_tool", "tool": "write_file", "arguments": {"path": "scratch-{n}.txt", "content": "x"}}


@pytest.mark.slow
def test_a_file_the_task_read_changes_on_disk_and_its_next_request_hears_of_it(agentd, tmp_path: Path) -> None:
    notes = tmp_path / "ws" / "notes.txt"
    notes.parent.mkdir()
    notes.write_text("The release is planned for March 3.\n")
    replies = [
        {"action": "call_tool", "tool": "read_file", "arguments": {"path": "notes.txt"}, "reason": "r"}, *[FILLER] * 7
    ]
    submit = ("--max-steps", "8", "--allow", "write", "Watch notes.txt")
    with serving(agentd, tmp_path, replies, submit) as (env, task_id):
        read = wait_until(lambda: any(a["operation"] == "read" for a in show(agentd, task_id, env)["artifacts"]))
        assert read, "the task never read notes.txt"
        notes.write_text("The release moved to April 14.\n")
        listed = wait_until(lambda: admitted(agentd, task_id, env, "file_watcher/file_changed"))
        assert listed, agentd("notifications", "list", "--task", task_id, env=env).stdout
        assert "notes.txt was modified on disk" in listed[0]
        assert "April 14" not in listed[0], "a notification describes the change; the file's text stays data"


@pytest.mark.slow
def test_an_approved_background_job_reports_its_end_to_the_task_that_started_it(agentd, tmp_path: Path) -> None:
    replies = [
        {"action": "call_tool", "tool": "start_job", "arguments": {"command": "sleep 1; echo built"}, "reason": "r"},
        FILLER,
    ]
    submit = ("--max-steps", "8", "--allow", "external", "--allow", "write", "Build it in the background")
    with serving(agentd, tmp_path, replies, submit) as (env, task_id):
        pending = wait_until(lambda: approvals(agentd, env))
        assert pending and pending[0]["tool"] == "start_job", "start_job never asked for approval"
        assert agentd("approvals", "approve", pending[0]["approval_id"], env=env).returncode == 0
        listed = wait_until(lambda: admitted(agentd, task_id, env, "job/job_finished"))
        assert listed, agentd("notifications", "list", "--task", task_id, env=env).stdout
        assert "exit code 0" in listed[0]


@pytest.mark.slow
def test_the_daemon_fires_a_schedule_and_runs_the_task_it_submits(agentd, tmp_path: Path) -> None:
    replies = [{"action": "final_answer", "answer": "All quiet.", "sources": []}]
    with serving(agentd, tmp_path, replies) as (env, _):
        added = agentd("schedule", "add", "--cron", "* * * * * *", "Report on the night", "--json", env=env)
        assert added.returncode == 0, added.stderr
        schedule_id = json.loads(added.stdout)["schedule_id"]

        def tasks(phase: str | None = None) -> list[dict]:
            listed = agentd("task", "list", "--json", env=env)
            found = json.loads(listed.stdout) if listed.returncode == 0 else []
            return [t for t in found if t["goal"] == "Report on the night" and phase in (None, t["phase"])]

        assert wait_until(tasks), "the schedule never fired"
        assert agentd("schedule", "remove", schedule_id, env=env).returncode == 0
        done = wait_until(lambda: tasks("completed"))
        assert done, agentd("task", "list", env=env).stdout
        listed = agentd("events", "list", "--task", done[0]["task_id"], "--type", "TaskSubmitted", "--json", env=env)
        assert json.loads(listed.stdout.splitlines()[0])["actor"] == f"schedule:{schedule_id}"


@pytest.mark.slow
def test_skills_added_changed_and_removed_while_the_daemon_runs_are_announced_and_usable(
    agentd, tmp_path: Path
) -> None:
    skills = tmp_path / "skills"
    write_skill(skills / "alpha", "Does alpha things. Use for alpha.")
    replies = [FILLER]
    submit = ("--max-steps", "30", "--allow", "write", "Look around")
    with serving(agentd, tmp_path, replies, submit, {"AGENTD_SKILLS_DIRS": str(skills)}) as (env, task_id):
        assert wait_until(lambda: show(agentd, task_id, env)["actions"]), "the first task never ran"
        write_skill(skills / "beta", "Does beta things. Use for beta.")
        announced = wait_until(lambda: admitted(agentd, task_id, env, "skill_catalog/catalog_changed"))
        assert announced and "added beta" in announced[0]

        second = agentd("task", "submit", "--max-steps", "2", "/beta do the beta thing", env=env).stdout.strip()

        def activated() -> list[dict]:
            out = agentd("events", "list", "--task", second, "--type", "SkillActivated", "--json", env=env).stdout
            return [json.loads(line) for line in out.splitlines()]

        found = wait_until(activated)
        assert found and found[0]["payload"]["name"] == "beta", "the new task did not take in the new skill"
        assert found[0]["payload"]["body"] == "Follow the beta steps."

        shutil.rmtree(skills / "alpha")
        (skills / "beta" / "SKILL.md").write_text("---\nname: beta\ndescription: Beta, revised.\n---\nNew steps.\n")
        def told() -> str:
            return " | ".join(admitted(agentd, task_id, env, "skill_catalog/catalog_changed"))

        assert wait_until(lambda: "removed alpha" in told() and "changed beta" in told()), told()


def write_skill(folder: Path, description: str) -> None:
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(f"---\nname: {folder.name}\ndescription: {description}\n---\n"
                                     f"Follow the {folder.name} steps.\n")


def admitted(agentd, task_id: str, env: dict, source_kind: str) -> list[str]:
    """Texts of this task's notifications of `source/kind` that were admitted into one of its calls."""
    out = agentd("notifications", "list", "--task", task_id, "--json", env=env)
    rows = json.loads(out.stdout) if out.returncode == 0 else []
    return [r["text"] for r in rows if f"{r['source']}/{r['kind']}" == source_kind and r["admitted_call"]]




@pytest.mark.slow
def test_a_serving_agentd_is_listed_as_a_worker_and_hands_back_its_tasks(agentd, tmp_path: Path) -> None:
    replies = [{"action": "final_answer", "answer": "All quiet.", "sources": []}]
    with serving(agentd, tmp_path, replies, ("Report on the night",)) as (env, task_id):
        assert wait_until(lambda: show(agentd, task_id, env).get("summary", {}).get("phase") == "completed")
        rows = json.loads(agentd("workers", "--json", env=env).stdout)
        assert [(r["state"], r["tasks"]) for r in rows] == [("serving", [])], rows
        assert rows[0]["page"].startswith("http://127.0.0.1:")
    assert json.loads(agentd("workers", "--json", env=env).stdout) == []
    stopped = json.loads(agentd("workers", "--all", "--json", env=env).stdout)
    assert [r["state"] for r in stopped] == ["stopped"]
    assert "no agentd serves this database" in agentd("workers", env=env).stdout
