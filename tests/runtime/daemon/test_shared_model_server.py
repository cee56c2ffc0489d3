"""Two `agentd serve` workers on one PostgreSQL database share one model server (`agentd model serve`,
llama-cpp-python's server on the smoke model), each taking only the tasks whose workspace it sees."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from store import EventStore
from store.events import ModelCalled, TaskPhase
from tests.helpers import REPO, free_port, wait_for_port
from tests.helpers.postgres import unreachable

_WHY = unreachable()
pytestmark = pytest.mark.skipif(_WHY is not None, reason=_WHY or "")

# One task a worker: the sharing is the point, and on a loaded machine a decision waits a minute or more
# for the server's queued replies (seen in CI: the second worker's tasks still running after 300 s).
TASKS_EACH = 1
# Long enough for every queued reply on a machine shared with other jobs; a hang ends the wait as well.
WAIT_S = 600




@pytest.mark.slow
def test_two_workers_run_their_own_workspaces_tasks_on_one_model_server(tmp_path: Path, pg_url: str, agentd) -> None:
    port = free_port()
    base = {"AGENTD_DATA_DIR": str(tmp_path / "data"), "AGENTD_MODEL": "smollm2-135m", "AGENTD_N_CTX": "4096",
            "PYTHONPATH": str(REPO)}
    with (tmp_path / "model-server.log").open("w") as log:
        server = subprocess.Popen([sys.executable, "-m", "runtime.cli", "model", "serve", "--port", str(port)],
                                  env={**os.environ, **base}, stdout=log, stderr=subprocess.STDOUT)
    workers: list[subprocess.Popen] = []
    try:
        wait_for_port(port, timeout=60)
        env = {**base, "AGENTD_DATABASE_URL": pg_url, "AGENTD_MODEL_URL": f"http://127.0.0.1:{port}"}
        spaces = [tmp_path / "ws-a", tmp_path / "ws-b"]
        tasks: dict[str, Path] = {}
        for ws in spaces:
            ws.mkdir()
            (ws / "notes.txt").write_text(f"This is {ws.name}.\n")
            for n in range(TASKS_EACH):
                out = agentd("task", "submit", "--workspace", str(ws), "--max-steps", "2",
                             f"Say which folder notes.txt names ({n}).", env=env)
                assert out.returncode == 0, out.stderr
                tasks[out.stdout.strip()] = ws
        for ws in spaces:
            workers.append(subprocess.Popen(
                [sys.executable, "-m", "runtime.cli", "serve", "--port", str(free_port())],
                env={**os.environ, **env, "AGENTD_WORKER_WORKSPACES": str(ws)},
                stdout=subprocess.DEVNULL, stderr=(tmp_path / f"worker-{ws.name}.log").open("w"),
            ))
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            with EventStore(pg_url) as store:
                phases = {t: store.task(t).summary.phase for t in tasks}
            if all(TaskPhase(p).finished or p == "awaiting_approval" for p in phases.values()):
                break
            time.sleep(1)
        done = all(TaskPhase(p).finished or p == "awaiting_approval" for p in phases.values())
        assert done, (phases, _tails(tmp_path))
        rows = json.loads(agentd("workers", "--json", env=env).stdout)
        assert sorted(r["workspaces"][0] for r in rows) == sorted(str(ws) for ws in spaces)
        with EventStore(pg_url) as store:
            calls = {t: [r.event for r in store.read_stream(t) if isinstance(r.event, ModelCalled)] for t in tasks}
        assert all(calls.values()), {t: len(c) for t, c in calls.items()}
        # The server reports each call's reuse, as `task show --calls` shows it for a local model; both
        # workers' tasks share the instructions' prefix, so past the first call the server finds some.
        made = [c for task_calls in calls.values() for c in task_calls]
        assert all(c.cached_tokens is not None and c.cached_tokens + c.evaluated_tokens == c.prompt_tokens
                   for c in made), [(c.prompt_tokens, c.cached_tokens, c.evaluated_tokens) for c in made]
        assert sum(c.cached_tokens > 0 for c in made) >= len(made) - 1, [c.cached_tokens for c in made]
    finally:
        for w in workers:
            w.send_signal(signal.SIGTERM)
            w.wait(timeout=60)
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
    said = {p.name: p.read_text() for p in tmp_path.glob("worker-*.log")}
    assert all(w.returncode == 0 for w in workers), said
    # Each worker ran only its own workspace's tasks: its log names each task it ran.
    for ws in spaces:
        own = said[f"worker-{ws.name}.log"]
        for task_id, where in tasks.items():
            assert (task_id in own) == (where == ws), (ws.name, task_id)


def _tails(folder: Path, lines: int = 15) -> dict[str, str]:
    """The last lines of the workers' and the server's logs, to tell a slow machine from a hang."""
    logs = sorted(folder.glob("*.log"))
    return {p.name: "\n".join(p.read_text(errors="replace").splitlines()[-lines:]) for p in logs}
