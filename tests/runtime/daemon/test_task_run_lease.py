"""`agentd task run` on a database other hosts serve runs a task only while it holds the task's lease,
as any worker does: a task a worker elsewhere holds is refused, and one run here is given back after."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from store import EventStore
from store.events import ModelCalled, RunInterrupted
from tests.helpers import scripted_endpoint
from tests.helpers.cli import one_error_line
from tests.helpers.daemon import REPO


@pytest.fixture
def model_url(tmp_path: Path):
    with scripted_endpoint(tmp_path, [
        {"action": "final_answer", "answer": "The workspace holds notes.txt.", "sources": ["workspace"]},
    ]) as url:
        yield url


def test_task_run_waits_for_no_lease_held_elsewhere_and_gives_its_own_back(
    tmp_path: Path, pg_url: str, model_url: str, agentd
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("hello\n")
    env = {"AGENTD_DATA_DIR": str(tmp_path / "data"), "AGENTD_DATABASE_URL": pg_url, "AGENTD_MODEL_URL": model_url,
           "AGENTD_MODEL": "smollm2-135m", "AGENTD_N_CTX": "8192"}
    submitted = agentd("task", "submit", "--workspace", str(ws), "What does notes.txt say?", env=env)
    assert submitted.returncode == 0, submitted.stderr
    task_id = submitted.stdout.strip()
    with EventStore(pg_url) as store:
        store.workers.register("elsewhere", "other-host", 1)
        assert store.workers.claim(task_id, "elsewhere", 60)

        refused = agentd("task", "run", task_id, env=env)
        one_error_line(refused, task_id, "elsewhere")
        assert not [r for r in store.read_stream(task_id) if isinstance(r.event, ModelCalled)], "ran anyway"

        store.workers.release("elsewhere", [task_id])
        ran = agentd("task", "run", task_id, env=env)
        assert ran.returncode == 0, ran.stderr
        assert f"{task_id} completed" in ran.stdout
        _, workers, leases = store.workers.snapshot()
    assert [(w.address, w.stopped_at is not None) for w in workers if w.worker_id != "elsewhere"] == [
        ("agentd task run", True)
    ]
    assert [lease for lease in leases if lease.task_id == task_id] == [], "the run kept its lease"


def test_task_run_stops_when_a_worker_took_its_task_over_after_it_stalled_past_its_lease(
    tmp_path: Path, pg_url: str, agentd
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("hello\n")
    steps = [{"action": "call_tool", "tool": "read_file", "arguments": {"path": "notes.txt"}},
             {"action": "final_answer", "answer": "notes.txt says hello.", "sources": ["notes.txt"]}]
    with scripted_endpoint(tmp_path, steps, delay_s=2.0) as url:
        env = {"AGENTD_DATA_DIR": str(tmp_path / "data"), "AGENTD_DATABASE_URL": pg_url, "AGENTD_MODEL_URL": url,
               "AGENTD_MODEL": "smollm2-135m", "AGENTD_N_CTX": "8192", "AGENTD_LEASE_S": "2"}
        submitted = agentd("task", "submit", "--workspace", str(ws), "What does notes.txt say?", env=env)
        assert submitted.returncode == 0, submitted.stderr
        task_id = submitted.stdout.strip()
        run = subprocess.Popen([sys.executable, "-m", "runtime.cli", "task", "run", task_id],
                               env={**os.environ, **env, "PYTHONPATH": str(REPO)}, cwd=REPO,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        with EventStore(pg_url) as store:
            deadline = time.monotonic() + 60
            while not [r for r in store.read_stream(task_id) if isinstance(r.event, ModelCalled)]:
                assert time.monotonic() < deadline and run.poll() is None, run.communicate()
                time.sleep(0.2)
            # The run stalls (a swapped-out or stopped process) past its lease, and a worker takes the task.
            run.send_signal(signal.SIGSTOP)
            store.workers.register("elsewhere", "other-host", 1)
            while not store.workers.claim(task_id, "elsewhere", 600):
                assert time.monotonic() < deadline
                time.sleep(0.5)
            run.send_signal(signal.SIGCONT)
            out, err = run.communicate(timeout=60)
            records = store.read_stream(task_id)
    # Its progress lines first (stderr is not a terminal), then the one line that says why it stopped.
    assert run.returncode == 1, (out, err)
    said = err.strip().splitlines()[-1]
    assert said.startswith(f"agentd: {task_id} was taken over by worker elsewhere") and "agentd task show" in said
    assert not [r for r in records if isinstance(r.event, RunInterrupted)], "wrote to a log it no longer held"
    assert f"{task_id} completed" not in out
