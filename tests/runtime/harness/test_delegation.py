"""Scoped sub-tasks: `delegate` runs a question as a task of its own that sees only its scope and tools,
and returns a typed result the parent's manifest records; rights are checked in code."""

from __future__ import annotations

import anyio

from runtime.agent.loop import run_task
from runtime.agent.profiles import WORKSPACE
from runtime.harness.delegation import Delegate
from runtime.inference.scripted import ScriptedModel
from store.events import ModelCalled, ProposalRejected, TaskSubmitted, ToolCallExecuted
from tests.helpers import answer, call, events, make_runtime, submit, user_turn

LEAD = WORKSPACE.model_copy(update={"name": "lead", "tools": (*WORKSPACE.tools, "delegate")})
QUESTION = "Who owns the release?"


def lead(store, tmp_path, replies, ws):
    (ws / "other.txt").write_text("Unrelated: the cafeteria opens at 8.\n")
    tool = Delegate()
    rt = make_runtime(store, ScriptedModel(replies), tmp_path, profiles={"lead": LEAD}, tools=[tool])
    tool.bind(rt)
    return rt


def run(rt, task_id) -> str:
    return anyio.run(lambda: run_task(rt, task_id))


def test_a_sub_task_sees_only_its_scope_and_tools_and_its_answer_comes_back_typed(
    store, release_workspace, tmp_path
) -> None:
    rt = lead(store, tmp_path, [
        call("read_file", path="notes.txt"), call("read_file", path="other.txt"),
        call("delegate", question=QUESTION, scope=["result:c1"], tools=[]),
        answer("Ana", "pasted:1"),  # the sub-task's only decision
        answer("Ana owns the release.", "result:c3"),
    ], release_workspace)
    task_id = submit(
        store, release_workspace, goal="Read notes.txt and other.txt and find the release owner.", profile="lead"
    )
    assert run(rt, task_id) == "completed"

    sub_id = f"{task_id}.c3"
    sub = store.read_stream(sub_id)
    submitted = sub[0].event
    assert isinstance(submitted, TaskSubmitted) and (submitted.parent, submitted.tools) == (task_id, ())
    sub_prompt = user_turn(
        next(p for p in rt.model.prompts if QUESTION in p.split("<|im_start|>user")[1].split("\n")[2])
    )
    # Its request is the question; what it was given is fenced as data; nothing else of the parent's.
    assert f"<request>\n{QUESTION}" in sub_prompt and '<data id="pasted:1" source="user:pasted"' in sub_prompt
    assert "The release is planned for March 3" in sub_prompt
    assert "cafeteria" not in sub_prompt and "find the release owner" not in sub_prompt
    assert "<tool>" not in rt.model.prompts[3].split("<|im_start|>user")[0]
    assert [e.call_index for e in events(store, sub_id, ModelCalled)] == [1]

    [delegated] = [e for e in events(store, task_id, ToolCallExecuted) if e.tool == "delegate"]
    assert delegated.status == "ok"
    assert delegated.observation["sub_task_id"] == sub_id and delegated.observation["answer"] == "Ana"
    assert delegated.observation["phase"] == "completed" and delegated.observation["steps"] == 1
    # The parent's next request shows what was delegated (the step) and what came back (the result).
    parent_last = user_turn(rt.model.prompts[-1])
    assert "you called delegate with" in parent_last and f"sub_task_id: {sub_id}" in parent_last


def test_a_delegation_beyond_the_parents_rights_is_refused_and_the_model_told(
    store, release_workspace, tmp_path
) -> None:
    rt = lead(store, tmp_path, [
        call("read_file", path="notes.txt"),
        call("delegate", question=QUESTION, scope=["result:c1"], tools=["write_file"]),
        call("delegate", question=QUESTION, scope=["result:c9"], tools=["read_file"]),
        call("delegate", question=QUESTION, scope=["result:c1"], tools=["delegate"]),
        answer("Could not delegate."),
    ], release_workspace)
    task_id = submit(store, release_workspace, goal="Find the release owner.", profile="lead")  # read-only
    assert run(rt, task_id) == "completed"
    refused = [e for e in events(store, task_id, ToolCallExecuted) if e.tool == "delegate"]
    assert [e.status for e in refused] == ["refused"] * 3
    assert refused[0].observation["error"] == "tool_not_allowed" and "'write_file'" in refused[0].observation["message"]
    assert refused[1].observation["error"] == "unknown_scope"
    assert refused[2].observation["error"] == "tool_not_allowed"
    # Nothing ran on the parent's behalf: no sub-task was submitted.
    assert [s.task_id for s in store.tasks()] == [task_id]
    assert "tool_not_allowed" in user_turn(rt.model.prompts[2])


def test_a_sub_task_is_offered_no_more_than_it_was_given(store, release_workspace, tmp_path) -> None:
    rt = lead(store, tmp_path, [
        call("delegate", question="What does other.txt say?", scope=[], tools=["read_file"]),
        call("write_file", path="x.txt", content="no"),  # the sub-task tries a tool it was not given
        call("read_file", path="other.txt"),
        answer("The cafeteria opens at 8.", "result:c1"),  # the sub-task's own first call
        answer("It opens at 8.", "result:c1"),
    ], release_workspace)
    task_id = submit(
        store, release_workspace, goal="Ask about other.txt.", profile="lead", allowed_effects=("read", "write")
    )
    assert run(rt, task_id) == "completed"
    sub_id = f"{task_id}.c1"
    sub_system = rt.model.prompts[1].split("<|im_start|>user")[0]
    assert '"name":"read_file"' in sub_system and '"name":"write_file"' not in sub_system
    assert not (release_workspace / "x.txt").exists()
    sub_results = events(store, sub_id, ToolCallExecuted)
    assert [e.tool for e in sub_results] == ["read_file"]
    refusal = events(store, sub_id, ProposalRejected)[0].error
    assert "no tool 'write_file'" in refusal
