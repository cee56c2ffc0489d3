"""After agentd stops mid-call: an idempotent call runs again, any other waits for a person and never
runs twice silently."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from runtime.agent.loop import arguments_hash, run_task
from runtime.inference.scripted import ScriptedModel
from store.events import (
    ApprovalDenied,
    ApprovalGranted,
    ApprovalRequested,
    TaskPhase,
    TaskPhaseChanged,
    ToolCallExecuted,
    ToolCallProposed,
    ToolCallStarted,
)
from tests.helpers import EVERYTHING, answer, events, make_runtime, submit


@pytest.fixture
def notes_workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("March 3\n")
    return ws


def crashed_during(store, task_id: str, tool: str, arguments: dict, idempotent: bool, approved: bool = False) -> None:
    """The log as agentd leaves it when killed while a tool runs: proposed, (approved,) started, no result."""
    events_ = [
        TaskPhaseChanged(phase=TaskPhase.RUNNING), ToolCallProposed(call_id="c1", tool=tool, arguments=arguments)
    ]
    if approved:
        events_ += [
            ApprovalRequested(
                approval_id="ap-first", call_id="c1", tool=tool, arguments_hash=arguments_hash(arguments)
            ),
            ApprovalGranted(approval_id="ap-first", by="ann"),
        ]
    events_.append(ToolCallStarted(call_id="c1", tool=tool, idempotent=idempotent))
    store.append(task_id, events_)


def run(rt, task_id: str) -> str:
    return anyio.run(lambda: run_task(rt, task_id))


def test_an_idempotent_call_with_unknown_outcome_simply_runs_again(store, notes_workspace, tmp_path) -> None:
    task_id = submit(store, notes_workspace)
    crashed_during(store, task_id, "read_file", {"path": "notes.txt"}, idempotent=True)
    rt = make_runtime(store, ScriptedModel([answer("March 3", "notes.txt")]), tmp_path)
    assert run(rt, task_id) == "completed"
    [result] = events(store, task_id, ToolCallExecuted)
    assert (result.call_id, result.status) == ("c1", "ok")
    assert len(events(store, task_id, ToolCallStarted)) == 2


def test_a_non_idempotent_call_with_unknown_outcome_waits_and_runs_once_if_approved(
    store, notes_workspace, tmp_path
) -> None:
    task_id = submit(store, notes_workspace, allowed_effects=EVERYTHING)
    command = "echo ran >> side-effects.txt"
    crashed_during(store, task_id, "shell", {"command": command}, idempotent=False, approved=True)
    rt = make_runtime(store, ScriptedModel([answer("done")]), tmp_path)
    assert run(rt, task_id) == "awaiting_approval"
    assert not (notes_workspace / "side-effects.txt").exists(), "the first approval must not be reused for a rerun"
    request = events(store, task_id, ApprovalRequested)[-1]
    assert request.approval_id != "ap-first" and "outcome unknown" in request.reason
    assert run(rt, task_id) == "awaiting_approval"
    store.append(task_id, [ApprovalGranted(approval_id=request.approval_id, by="ann")])
    assert run(rt, task_id) == "completed"
    assert (notes_workspace / "side-effects.txt").read_text() == "ran\n"


def test_a_non_idempotent_call_whose_rerun_is_denied_is_recorded_as_unknown_and_never_run(
    store, notes_workspace, tmp_path
) -> None:
    task_id = submit(store, notes_workspace, allowed_effects=EVERYTHING)
    crashed_during(
        store, task_id, "shell", {"command": "echo ran >> side-effects.txt"}, idempotent=False, approved=True
    )
    rt = make_runtime(store, ScriptedModel([answer("I could not tell whether it ran")]), tmp_path)
    run(rt, task_id)
    request = events(store, task_id, ApprovalRequested)[-1]
    store.append(task_id, [ApprovalDenied(approval_id=request.approval_id, by="ann", reason="check by hand")])
    assert run(rt, task_id) == "completed"
    [result] = events(store, task_id, ToolCallExecuted)
    assert result.status == "outcome_unknown"
    assert not (notes_workspace / "side-effects.txt").exists()
    assert "may or may not have taken effect" in rt.model.prompts[-1]
