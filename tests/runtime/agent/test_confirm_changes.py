"""A task that confirms its changes: each change waits for a person, who is shown its diff first, and runs
only on the bytes that person saw."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from store.events import ApprovalGranted, ApprovalRequested, FileChanged, ToolCallExecuted
from tests.helpers import answer, call, events, run, scripted_runtime, submit

TODO = "- buy milk\n- call the plumber\n"
GOAL = 'Add the line "- water the plants" to todo.txt'


@pytest.fixture
def todo_workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "todo.txt").write_text(TODO)
    return ws


def confirming(store, data_dir, workspace, replies, goal=GOAL) -> tuple:
    rt = scripted_runtime(store, data_dir, replies)
    task_id = submit(store, workspace, goal, allowed_effects=("read", "write", "external"), confirm_changes=True)
    return rt, task_id


def grant(store, task_id: str) -> ApprovalRequested:
    request = events(store, task_id, ApprovalRequested)[-1]
    store.append(task_id, [ApprovalGranted(approval_id=request.approval_id, by="ann")], actor="ann")
    return request


def test_a_change_waits_with_its_diff_and_runs_once_confirmed(store, data_dir, todo_workspace, agentd) -> None:
    rt, task_id = confirming(store, data_dir, todo_workspace, [
        call("read_file", path="todo.txt"),
        call("append_file", path="todo.txt", text="- water the plants"),
        answer("I added the line to todo.txt."),
    ])
    assert run(rt, task_id) == "awaiting_approval"
    assert (todo_workspace / "todo.txt").read_text() == TODO, "nothing changes before a person confirms"
    [request] = events(store, task_id, ApprovalRequested)
    assert "+- water the plants" in request.preview
    assert request.bound == {"todo.txt": hashlib.sha256(TODO.encode()).hexdigest()}
    listed = agentd("approvals", "list")
    assert f"{request.approval_id} would change:" in listed.stdout and "+- water the plants" in listed.stdout

    grant(store, task_id)
    assert run(rt, task_id) == "completed"
    assert (todo_workspace / "todo.txt").read_text() == TODO + "- water the plants\n"
    assert len(events(store, task_id, FileChanged)) == 1


def test_a_confirmed_change_is_not_made_on_bytes_nobody_saw(store, data_dir, todo_workspace) -> None:
    rt, task_id = confirming(store, data_dir, todo_workspace, [
        call("read_file", path="todo.txt"),
        call("append_file", path="todo.txt", text="- water the plants"),
        answer("The list changed before my line could be added; nothing was changed."),
    ])
    run(rt, task_id)
    grant(store, task_id)
    (todo_workspace / "todo.txt").write_text(TODO + "- the user's own line\n")
    run(rt, task_id)
    executed = [e for e in events(store, task_id, ToolCallExecuted) if e.tool == "append_file"]
    assert executed[0].status == "refused" and executed[0].observation["error"] == "changed_since_confirmed"
    assert (todo_workspace / "todo.txt").read_text() == TODO + "- the user's own line\n"
    assert events(store, task_id, FileChanged) == []


def test_a_call_that_would_change_nothing_asks_no_one(store, data_dir, todo_workspace) -> None:
    rt, task_id = confirming(store, data_dir, todo_workspace, [
        call("read_file", path="todo.txt"),
        call("edit_file", path="todo.txt", old="- buy eggs", new="- buy eggs\n- water the plants"),
        answer("todo.txt has no line '- buy eggs'; nothing was changed."),
    ])
    assert run(rt, task_id) == "completed"
    assert events(store, task_id, ApprovalRequested) == []


def test_a_command_that_may_change_any_file_says_its_change_is_shown_after(store, data_dir, todo_workspace) -> None:
    rt, task_id = confirming(store, data_dir, todo_workspace, [call("shell", command="touch new.txt")],
                             goal="Run `touch new.txt`")
    assert run(rt, task_id) == "awaiting_approval"
    [request] = events(store, task_id, ApprovalRequested)
    assert "may change any file in the workspace" in request.preview and request.bound == {}


def test_task_submit_confirm_changes_is_recorded_on_the_task(agentd, todo_workspace) -> None:
    submitted = agentd(
        "task", "submit", "--confirm-changes", "--allow", "write", "--workspace", str(todo_workspace), GOAL
    )
    assert submitted.returncode == 0, submitted.stderr
    shown = agentd("events", "list", "--task", submitted.stdout.strip(), "--type", "TaskSubmitted", "--json")
    assert '"confirm_changes":true' in shown.stdout.replace(" ", "")
