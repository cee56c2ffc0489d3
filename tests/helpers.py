"""What tests of the agent loop share: a runtime on a scripted model, submitting and running a task, and
the replies a script is made of. Test modules import this; none imports another test module."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio

from runtime.agent.loop import Runtime, run_task
from runtime.agent.plugins import load
from runtime.artifacts import ArtifactStore
from runtime.eval.case import Case
from runtime.harness.tasks import submit_task
from runtime.inference.scripted import ScriptedModel
from runtime.tools import Tool
from store import NO_STREAM, EventStore
from store.events import (
    AnswerGiven,
    ModelCalled,
    TaskPhase,
    TaskPhaseChanged,
    TaskSubmitted,
    ToolCallExecuted,
    ToolCallProposed,
)

# What the agent loop's tests ask about: a release date and its owner.
RELEASE_NOTES = {"notes.txt": "The release is planned for March 3. Owner: Ana.\n"}
# What the framing tests show the model: a README, a CSV file and notes.
SMALL_PROJECT = {"README.md": "# demo\n", "data.csv": "a,b\n1,2\n", "notes.txt": "Release: March 3.\n"}


def workspace_of(tmp_path: Path, files: Mapping[str, str]) -> Path:
    """A workspace folder, `tmp_path/ws`, holding `files` (name: text). A module's `workspace` fixture
    returns one; conftest's is empty."""
    ws = tmp_path / "ws"
    ws.mkdir()
    for name, text in files.items():
        (ws / name).write_text(text)
    return ws


def scripted_runtime(
    store: EventStore,
    data_dir: Path,
    replies: Sequence[dict],
    *,
    plugins: Iterable[str] = (),
    tools: Iterable[Tool] = (),
    **kw: Any,
) -> Runtime:
    """A runtime on a scripted model whose artifacts live in `data_dir/artifacts`, as agentd's own do."""
    loaded = load(list(plugins))
    for tool in tools:
        loaded.tools.register(tool)
    return Runtime(
        store=store,
        model=ScriptedModel(list(replies)),
        tools=loaded.tools,
        profiles=loaded.profiles,
        artifacts=ArtifactStore(data_dir / "artifacts"),
        protected=(data_dir,),
        **kw,
    )


def submit(store: EventStore, workspace: Path, goal_text: str, **kw: Any) -> str:
    task_id = f"t-{len(store.tasks()) + 1}"
    store.append(task_id, submit_task(goal_text, workspace, **kw), expected_version=NO_STREAM, actor="ann")
    return task_id


def run(rt: Runtime, task_id: str, **kw: Any) -> str:
    return anyio.run(lambda: run_task(rt, task_id, **kw))


def events(store: EventStore, task_id: str, kind) -> list:
    return [r.event for r in store.read_stream(task_id) if isinstance(r.event, kind)]


def call(tool: str, **arguments: Any) -> dict:
    return {"action": "call_tool", "tool": tool, "arguments": arguments, "reason": "test"}


def answer(text: str, *sources: str) -> dict:
    return {"action": "final_answer", "answer": text, "sources": list(sources)}


def one_error_line(result, *needles: str, code: int = 1) -> str:
    """The one `agentd:` line a failed command printed on stderr, holding each of `needles`."""
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("agentd: "), result.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def serve_refused(data_dir, what: str):
    """Run `agentd serve` on `data_dir` and return how it ended, expecting it to refuse to start within
    30 s; if it starts, stop it and fail, naming `what` it should have refused."""
    import os
    import socket
    import subprocess
    import sys
    import time

    import pytest

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "runtime.cli", "serve", "--port", str(port), "--model", "smollm2-135m"],
        env={**os.environ, "AGENTD_DATA_DIR": str(data_dir)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while server.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    if server.poll() is None:
        server.terminate()
        out, err = server.communicate(timeout=60)
        pytest.fail(f"serve started on {what}: {out[-1000:]} {err[-1000:]}")
    out, err = server.communicate()
    return subprocess.CompletedProcess(server.args, server.returncode, out, err)


def lay_out_case(case: Case, scratch: Path) -> Path:
    """An eval case's files in `scratch/workspace`, as a run lays them out."""
    workspace = scratch / "workspace"
    for name, text in case.files.items():
        (workspace / name).parent.mkdir(parents=True, exist_ok=True)
        (workspace / name).write_text(text, encoding="utf-8")
    return workspace


def recorded_run(case: Case, answer: str, *, ran: bool = True) -> list:
    """The events of a run that ran the case's required tools (the first of each list) and answered."""
    tools = [item if isinstance(item, str) else item[0] for item in case.required_tools] if ran else []
    events: list = [TaskSubmitted(goal=case.input, workspace="/w", max_steps=case.step_cap),
                    TaskPhaseChanged(phase=TaskPhase.RUNNING, reason="started")]
    for i, name in enumerate(tools, start=1):
        events += [_model_called(i), ToolCallProposed(call_id=f"c{i}", tool=name),
                   ToolCallExecuted(call_id=f"c{i}", tool=name, status="ok")]
    events += [_model_called(len(tools) + 1), AnswerGiven(answer=answer),
               TaskPhaseChanged(phase=TaskPhase.COMPLETED, reason="answered")]
    return events


def _model_called(step: int) -> ModelCalled:
    return ModelCalled(call_index=step, attempt=1, model="m", prompt_tokens=100, completion_tokens=10, output="{}")
