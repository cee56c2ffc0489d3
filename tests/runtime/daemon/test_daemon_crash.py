"""kill -9 of a serving agentd at random moments, many times: nothing lost, nothing admitted twice,
no non-idempotent call repeated. The model is a scripted endpoint (tests/helpers/model_server.py) so the
daemon's timing, not the model's wit, decides where each kill lands."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from notifications import queue
from store import EventStore
from store.events import ModelCalled, NotificationsAdmitted, ToolCallExecuted, ToolCallStarted
from store.replay import verify
from tests.helpers import REPO, free_port, scripted_endpoint

ITERATIONS = 12
TASKS = 4

PLUGIN = '''
"""A non-idempotent tool whose every run leaves a line behind, to count runs across crashes."""
import time
from pathlib import Path
from pydantic import BaseModel
from runtime.agent.profiles import WORKSPACE
from runtime.tools import Effect, Tool, ToolContract


class Args(BaseModel):
    model_config = {"extra": "forbid"}
    text: str


class Out(BaseModel):
    lines: int


class AppendLine(Tool):
    contract = ToolContract(name="append_line", description="Append one line to side-effects.log.",
                            input_model=Args, output_model=Out, effects=(Effect.WRITE,), idempotent=False,
                            scope="workspace", timeout_s=5)

    def run(self, ctx, args):
        log = Path(ctx.workspace) / "side-effects.log"
        with log.open("a") as f:
            f.write(args.text + "\\n")
        # The effect is done; its result is not recorded yet. A kill in this window is the case that
        # must not lead to a second run.
        time.sleep(0.5)
        return Out(lines=len(log.read_text().splitlines()))


def register(tools, profiles):
    tools.register(AppendLine())
    profiles["chaos"] = WORKSPACE.model_copy(update={"name": "chaos", "tools": ("append_line", "read_file")})
'''


@pytest.fixture
def model_url(tmp_path: Path):
    replies = [{"action": "call_tool", "tool": "append_line", "arguments": {"text": "line-{n}"}, "reason": "r"}]
    with scripted_endpoint(tmp_path, replies, delay_s=0.25) as url:
        yield url


def check_invariants(db: Path, workspace: Path, scratch: Path) -> None:
    with EventStore(f"sqlite:///{db}") as store:
        with store.reading() as conn:
            seqs = [r[0] for r in conn.exec_driver_sql("SELECT seq FROM events ORDER BY seq")]
            assert seqs == list(range(1, len(seqs) + 1)), "a gap in the log"
            verify(conn, f"sqlite:///{scratch}")
        for summary in store.tasks():
            admitted: list[str] = []
            for rec in store.read_stream(summary.task_id):
                if isinstance(rec.event, NotificationsAdmitted):
                    for item in rec.event.items:
                        admitted += [item.notification_id, *item.coalesced]
            assert len(admitted) == len(set(admitted)), f"{summary.task_id} admitted a notification twice"
    side_effects = workspace.joinpath("side-effects.log")
    lines = side_effects.read_text().splitlines() if side_effects.exists() else []
    assert len(lines) == len(set(lines)), "a non-idempotent call ran twice"


@pytest.mark.slow
def test_kill_9_at_random_moments_loses_nothing_and_repeats_nothing(tmp_path: Path, model_url: str, agentd) -> None:
    rng = random.Random(20261129)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("hello\n")
    plugin = tmp_path / "chaos.py"
    plugin.write_text(PLUGIN)
    data = tmp_path / "data"
    env = {
        # The endpoint tokenizes with the smoke model, so agentd takes its chat template from the same file.
        "AGENTD_DATA_DIR": str(data), "AGENTD_MODEL_URL": model_url, "AGENTD_MODEL": "smollm2-135m",
        "AGENTD_N_CTX": "8192",
        "AGENTD_PLUGINS": str(plugin), "AGENTD_WORKSPACE": str(workspace), "PYTHONPATH": str(REPO),
    }
    tasks = []
    for n in range(TASKS):
        out = agentd("task", "submit", "--profile", "chaos", "--allow", "write", "--max-steps", "8",
                     f"keep appending lines, task {n}", env=env)
        assert out.returncode == 0, out.stderr
        tasks.append(out.stdout.strip())
    db = data / "agentd.db"
    enqueued: list[tuple[str, str]] = []

    for iteration in range(ITERATIONS):
        env["AGENTD_PORT"] = str(free_port())
        daemon = subprocess.Popen([sys.executable, "-m", "runtime.cli", "serve"], env={**os.environ, **env},
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.8, 3.0))
        with EventStore(f"sqlite:///{db}") as store:
            task = rng.choice(tasks)
            n = queue.new_notification(source="operator", kind="message", tasks=[task], text=f"ping {iteration}")
            queue.enqueue(store, n)
            enqueued.append((task, n.notification_id))
        time.sleep(rng.uniform(0.0, 1.5))
        daemon.send_signal(signal.SIGKILL)
        daemon.wait()
        check_invariants(db, workspace, tmp_path / f"scratch-{iteration}.db")

    # Let every task run to its end: deny each rerun of a call whose outcome is unknown.
    env["AGENTD_PORT"] = str(free_port())
    daemon = subprocess.Popen([sys.executable, "-m", "runtime.cli", "serve"], env={**os.environ, **env},
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            for approval in json.loads(agentd("approvals", "list", "--json", env=env).stdout):
                agentd("approvals", "deny", approval["approval_id"], "--reason", "unknown", env=env)
            phases = {
                json.loads(agentd("task", "show", t, "--json", env=env).stdout)["summary"]["phase"] for t in tasks
            }
            if phases <= {"completed", "failed"}:
                break
            time.sleep(1)
        assert phases <= {"completed", "failed"}, f"tasks did not finish: {phases}"
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=60)
    check_invariants(db, workspace, tmp_path / "scratch-final.db")

    with EventStore(f"sqlite:///{db}") as store:
        for task, nid in enqueued:
            records = store.read_stream(task)
            admitted = {i for r in records if isinstance(r.event, NotificationsAdmitted)
                        for item in r.event.items for i in (item.notification_id, *item.coalesced)}
            enqueue_seq = next(r.seq for r in store.read_stream("notifications") if r.event.notification_id == nid)
            later_calls = [r for r in records if isinstance(r.event, ModelCalled) and r.seq > enqueue_seq]
            if later_calls:
                assert nid in admitted, f"notification {nid} for {task} was never admitted though calls followed"
        starts = sum(isinstance(r.event, ToolCallStarted) for t in tasks for r in store.read_stream(t))
        results = sum(isinstance(r.event, ToolCallExecuted) for t in tasks for r in store.read_stream(t))
    assert starts >= results > 0
