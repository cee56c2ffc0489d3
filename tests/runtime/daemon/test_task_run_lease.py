"""`agentd task run` on a database other hosts serve runs a task only while it holds the task's lease,
as any worker does: a task a worker elsewhere holds is refused, and one run here is given back after."""

from __future__ import annotations

from pathlib import Path

import pytest

from store import EventStore
from store.events import ModelCalled
from tests.helpers import scripted_endpoint
from tests.helpers.cli import one_error_line


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
