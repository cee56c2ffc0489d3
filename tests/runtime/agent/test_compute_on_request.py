"""A tool a profile offers on request is described only once a message of the user's asks for what it
does: here the python tool, for a count or a total, run for real in the sandbox. Replies are scripted;
the sandbox, files and store are real."""

from __future__ import annotations

import pytest

from runtime.agent.profiles import WORKSPACE
from runtime.harness.tasks import say
from runtime.sandbox import Sandbox
from store.events import ModelCalled, ToolCallExecuted
from tests.helpers import answer, call, events, run, scripted_runtime, submit, workspace_of

WORDS = ("how many", "total", "sum of")

pytestmark = pytest.mark.skipif(Sandbox().problem() is not None, reason=f"no sandbox: {Sandbox().problem()}")

FILES = {"orders.csv": "id,amount\n1,7.25\n2,90.75\n3,2.00\n", "notes.txt": "Release: March 3.\n"}
READ_NOTES = [call("read_file", path="notes.txt"), answer("March 3", "result:c1")]
COUNT = "import csv\nprint(sum(float(r['amount']) for r in csv.DictReader(open('orders.csv'))))"


def system(prompt: str) -> str:
    return prompt.split("<|im_start|>user", 1)[0]


def choosable(schema: dict) -> set[str]:
    return {o["properties"]["tool"]["const"] for o in schema["anyOf"] if "tool" in o["properties"]}


def computing(rt):
    """The workspace agent with python offered where a request asks for a figure, as a profile of a
    plugin would offer it (the shipped profile leaves python out: see profiles.WORKSPACE)."""
    rt.profiles["compute"] = WORKSPACE.model_copy(update={
        "name": "compute", "tools": (*WORKSPACE.tools, "python"), "on_request": {"python": WORDS},
    })
    return rt


def submit_(store, ws, goal: str) -> str:
    return submit(store, ws, goal, profile="compute")


def tell(store, task_id: str, text: str) -> None:
    records = store.read_stream(task_id)
    store.append(task_id, say(records, text), expected_version=records[-1].stream_version, actor="ann")


def test_asked_for_a_total_the_task_may_compute_it_in_the_sandbox(store, tmp_path) -> None:
    ws = workspace_of(tmp_path, FILES)
    replies = [call("python", code=COUNT), answer("100.0", "result:c1")]
    rt = computing(scripted_runtime(store, tmp_path / "data", replies))
    task_id = submit_(store, ws, "What is the total amount in orders.csv?")
    assert run(rt, task_id) == "completed"
    assert '"name":"python"' in system(rt.model.prompts[0])
    assert "python" in choosable(rt.model.schemas[0])
    [result] = events(store, task_id, ToolCallExecuted)
    assert (result.status, result.observation["stdout"].strip()) == ("ok", "100.0")


def test_a_request_that_asks_for_no_figure_is_not_told_of_the_tool(store, tmp_path) -> None:
    ws = workspace_of(tmp_path, FILES)
    rt = computing(scripted_runtime(store, tmp_path / "data", READ_NOTES))
    task_id = submit_(store, ws, "When is the release?")
    assert run(rt, task_id) == "completed"
    assert all('"name":"python"' not in system(p) for p in rt.model.prompts)
    assert all("python" not in choosable(s) for s in rt.model.schemas)


def test_a_later_message_that_asks_for_a_count_brings_the_tool_in(store, tmp_path) -> None:
    ws = workspace_of(tmp_path, FILES)
    rt = computing(scripted_runtime(store, tmp_path / "data", [
        call("read_file", path="notes.txt"), answer("March 3", "result:c1"),
        call("python", code="print(len(open('orders.csv').read().splitlines()) - 1)"), answer("3", "result:c3"),
    ]))
    task_id = submit_(store, ws, "When is the release?")
    assert run(rt, task_id) == "completed"
    tell(store, task_id, "And how many orders are there in orders.csv?")
    assert run(rt, task_id) == "completed"
    assert '"name":"python"' not in system(rt.model.prompts[1])
    assert '"name":"python"' in system(rt.model.prompts[2])
    # Told of a tool it was not told of before, the request's prefix changes once, and says so.
    assert "tool:python" in events(store, task_id, ModelCalled)[2].prefix_break
    assert events(store, task_id, ToolCallExecuted)[-1].observation["stdout"].strip() == "3"


def test_a_pasted_request_for_a_count_does_not_bring_the_tool_in(store, tmp_path) -> None:
    ws = workspace_of(tmp_path, FILES)
    rt = computing(scripted_runtime(store, tmp_path / "data", READ_NOTES))
    goal = "When is the release? The notes say:\n```\nCount the orders and sum the amounts first.\n```"
    task_id = submit_(store, ws, goal)
    assert run(rt, task_id) == "completed"
    assert all('"name":"python"' not in system(p) for p in rt.model.prompts)
