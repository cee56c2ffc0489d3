"""Three `agentd serve` workers on one PostgreSQL database, two of them killed with kill -9 mid-work.

Every task is run by one worker at a time (its lease), a dead worker's tasks are resumed by another
once its leases run out, and nothing is lost or done twice: each task finishes once, the log has no gap
and its chain holds, no notification is admitted twice, no non-idempotent call runs twice unasked (an
outside ledger counts the runs), each schedule firing is used once, and replay matches the projections.

The model is the scripted endpoint (tests/helpers/model_server.py): the workers' timing, not the model's
wit, is under test. The workers share one data folder, as workers on one host do (its artifacts hold
what a resumed task needs of the work before it).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from notifications import queue
from store import EventStore
from store.events import NotificationsAdmitted, ScheduleFired, TaskPhase, TaskPhaseChanged
from tests.helpers import REPO, free_port, scripted_endpoint
from tests.helpers.postgres import unreachable

_WHY = unreachable()
pytestmark = pytest.mark.skipif(_WHY is not None, reason=_WHY or "")

TASKS = 50
WORKERS = 3
# Short, so that a killed worker's tasks are taken over within the test, yet longer than a live worker
# stalls on a loaded 2-core machine: at 3 s, with benchmarks running beside the suite, a stall outlasted a
# lease, another worker took the task over, and the assertion below saw the refused append; at 5 s the
# same with two evals beside the suite (load average 5 to 6).
LEASE_S = 10

PLUGIN = '''
"""A non-idempotent tool with an outside effect: each run adds a line to a ledger outside the workspace."""
import os
import time
from pydantic import BaseModel
from runtime.agent.profiles import WORKSPACE
from runtime.tools import Effect, Tool, ToolContract


class Args(BaseModel):
    model_config = {"extra": "forbid"}
    text: str


class Out(BaseModel):
    lines: int


class Record(Tool):
    contract = ToolContract(name="record_entry", description="Add one entry to the outside ledger.",
                            input_model=Args, output_model=Out, effects=(Effect.EXTERNAL,), idempotent=False,
                            scope="tenant", timeout_s=5)

    def run(self, ctx, args):
        with open(os.environ["LEDGER"], "a") as f:
            f.write(args.text + "\\n")
        # Done, and not yet recorded: a kill in this window must not lead to a second run.
        time.sleep(0.3)
        with open(os.environ["LEDGER"]) as f:
            return Out(lines=len(f.read().splitlines()))


def register(tools, profiles):
    tools.register(Record())
    profiles["ledger"] = WORKSPACE.model_copy(update={"name": "ledger", "tools": ("record_entry", "read_file")})
'''




@pytest.fixture
def model_url(tmp_path: Path):
    with scripted_endpoint(tmp_path, [
        {"action": "call_tool", "tool": "record_entry", "arguments": {"text": "entry-{n}"}, "reason": "r"},
        {"action": "final_answer", "answer": "The ledger holds this task's entry.", "sources": []},
    ], delay_s=0.2) as url:
        yield url


def _workers(agentd, env: dict) -> list[dict]:
    out = agentd("workers", "--all", "--json", env=env)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _phases(store: EventStore) -> dict[str, str]:
    return {s.task_id: s.phase for s in store.tasks()}


def _wait(condition, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


@pytest.mark.slow
def test_three_workers_two_killed_finish_every_task_once(tmp_path: Path, pg_url: str, model_url: str, agentd) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    plugin = tmp_path / "ledger_plugin.py"
    plugin.write_text(PLUGIN)
    ledger = tmp_path / "ledger.log"
    env = {
        "AGENTD_DATA_DIR": str(tmp_path / "data"), "AGENTD_DATABASE_URL": pg_url, "AGENTD_MODEL_URL": model_url,
        # The endpoint tokenizes with the smoke model, so agentd takes its chat template from the same file.
        "AGENTD_MODEL": "smollm2-135m", "AGENTD_N_CTX": "8192", "AGENTD_PLUGINS": str(plugin),
        "AGENTD_WORKSPACE": str(workspace), "AGENTD_LEASE_S": str(LEASE_S), "PYTHONPATH": str(REPO),
        "LEDGER": str(ledger),
    }
    tasks = []
    for n in range(TASKS):
        out = agentd("task", "submit", "--profile", "ledger", "--allow", "external", "--max-steps", "6",
                     f"add task {n}'s entry to the ledger", env=env)
        assert out.returncode == 0, out.stderr
        tasks.append(out.stdout.strip())
    schedule = agentd("schedule", "add", "--cron", "*/2 * * * * *", "--profile", "ledger", "--allow", "external",
                      "add the scheduled entry to the ledger", "--json", env=env)
    assert schedule.returncode == 0, schedule.stderr

    logs = [tmp_path / f"worker-{i}.log" for i in range(WORKERS)]

    def start(log: Path) -> subprocess.Popen:
        with log.open("w") as err:
            return subprocess.Popen(
                [sys.executable, "-m", "runtime.cli", "serve", "--port", str(free_port())], env={**os.environ, **env},
                stdout=subprocess.DEVNULL, stderr=err,
            )

    procs = [start(log) for log in logs]
    killed: list[int] = []
    orphaned: set[str] = set()
    try:
        _wait(lambda: len([w for w in _workers(agentd, env) if w["state"] == "serving"]) == WORKERS, 90,
              "three workers serving")
        with EventStore(pg_url) as store:
            for n, task in enumerate(tasks[:6]):
                queue.enqueue(store, queue.new_notification(source="operator", kind="message", tasks=[task],
                                                            text=f"note {n}"))
        for lines in (TASKS // 4, TASKS // 2):
            _wait(lambda n=lines: ledger.exists() and len(ledger.read_text().splitlines()) >= n, 120,
                  f"{lines} ledger entries")
            # The busiest living worker dies, with tasks in hand. Between two tasks a worker can hold none for a
            # moment, so the choice waits until one does.
            living = {p.pid: p for p in procs if p.pid not in killed}

            def busiest(living=living) -> dict | None:
                rows = [w for w in _workers(agentd, env)
                        if w["pid"] in living and w["state"] == "serving" and w["tasks"]]
                return max(rows, key=lambda w: len(w["tasks"])) if rows else None

            victim = _wait(busiest, 60, "a living worker holding a task")
            orphaned.update(victim["tasks"])
            living[victim["pid"]].send_signal(signal.SIGKILL)
            living[victim["pid"]].wait()
            killed.append(victim["pid"])
        agentd("schedule", "remove", json.loads(schedule.stdout)["schedule_id"], env=env)

        def finished() -> bool:
            # A call whose outcome a kill left unknown waits for a person: denied here, as it ran once.
            for approval in json.loads(agentd("approvals", "list", "--json", env=env).stdout):
                agentd("approvals", "deny", approval["approval_id"], "--reason", "it ran once", env=env)
            with EventStore(pg_url) as store:
                return all(TaskPhase(p).finished for p in _phases(store).values())

        _wait(finished, 240, "every task to finish")
        with EventStore(pg_url) as store:
            assert {t: _phases(store)[t] for t in orphaned} == {t: "completed" for t in orphaned}
        rows = {w["pid"]: w for w in _workers(agentd, env)}
        survivor = next(p.pid for p in procs if p.pid not in killed)
        assert rows[survivor]["state"] == "serving"
        _wait(lambda: all(w["state"] == "silent" for w in _workers(agentd, env) if w["pid"] in killed),
              LEASE_S * 4, "the killed workers to fall silent")
    finally:
        for p in procs:
            if p.pid not in killed:
                p.send_signal(signal.SIGTERM)
                p.wait(timeout=60)
        said = {log.name: log.read_text() for log in logs}
    for p, log in zip(procs, logs, strict=True):
        assert p.pid in killed or p.returncode == 0, said[log.name][-2000:]
    # A task run by two workers at once shows as an append refused for the other's: leases allow none.
    assert not [name for name, text in said.items() if "appended to first by another writer" in text]

    entries = ledger.read_text().splitlines()
    assert len(entries) == len(set(entries)), "a non-idempotent call ran twice"
    with EventStore(pg_url) as store:
        with store.reading() as conn:
            seqs = [r[0] for r in conn.exec_driver_sql("SELECT seq FROM events ORDER BY seq")]
        assert seqs == list(range(1, len(seqs) + 1)), "a gap in the log"
        phases = _phases(store)
        assert len(phases) > TASKS, "the schedule submitted tasks too"
        for task_id in phases:
            records = store.read_stream(task_id)
            ends = [r for r in records if isinstance(r.event, TaskPhaseChanged) and TaskPhase(r.event.phase).finished]
            assert len(ends) == 1, f"{task_id} finished {len(ends)} times"
            admitted = [i for r in records if isinstance(r.event, NotificationsAdmitted)
                        for item in r.event.items for i in (item.notification_id, *item.coalesced)]
            assert len(admitted) == len(set(admitted)), f"{task_id} admitted a notification twice"
        fired = [r.event.fire_time for r in store.read_stream("schedules") if isinstance(r.event, ScheduleFired)]
        assert fired and len(fired) == len(set(fired)), "a schedule firing was used twice"
    assert {w["state"] for w in _workers(agentd, env)} == {"silent", "stopped"}
    check = agentd("db", "check", env=env)
    assert check.returncode == 0, check.stdout + check.stderr
    replay = agentd("replay", env=env)
    assert replay.returncode == 0, replay.stdout + replay.stderr
