"""The loop's choice rules over tool contracts: each holds for any tool with the same promises."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.agent.plugins import load as load_plugins
from runtime.agent.rules import asks_a_change, question_changes_nothing
from runtime.eval.case import load
from runtime.eval.suite import generate
from runtime.tools.builtin import builtin_registry
from runtime.tools.contract import Effect
from store.events import ProposalRejected
from tests.helpers import REPO, answer, call, events, run, scripted_runtime, submit, workspace_of

TOOLS = builtin_registry()


@pytest.mark.parametrize(
    ("request_", "changes"),
    [
        ("When is the site launch due, according to notes/2026-01-23.md?", False),
        ("Which file has the settings? And what do the logs say?", False),
        ("Can you add 'buy milk' to todo.txt?", True),
        ("Is the port set to 8080? If not, setting it would help?", True),
        ("Bump the version to 0.8.0.", True),
        ("Read notes/2026-01-23.md and tell me the deadline for the audit.", False),
        ("Show me the first lines of todo.txt, then explain them", False),
        ("Summarise notes/ideas.md", True),  # not a request for information alone: the changes stay offered
        ("Tell me when you have added the date to notes.txt.", True),
    ],
)
def test_a_question_asks_a_change_only_in_words_that_say_so(request_: str, changes: bool) -> None:
    assert asks_a_change(request_) is changes


def test_only_tools_that_write_are_left_out_of_a_question() -> None:
    question = "What does README.md say about support?"
    left_out = {t.contract.name for t in TOOLS.select() if question_changes_nothing(t.contract, question)}
    assert left_out == {"append_file", "edit_file", "write_file"}
    assert not any(question_changes_nothing(t.contract, "Add a line to README.md.") for t in TOOLS.select())


def test_a_write_outside_the_workspace_is_left_to_its_profile() -> None:
    rotate = load_plugins([REPO / "examples" / "support_agent" / "plugin.py"]).tools.get("rotate_api_key").contract
    assert Effect.WRITE in rotate.effects and rotate.scope != "workspace"
    assert not question_changes_nothing(rotate, "Why is my API key not working?")


def test_every_request_of_the_eval_sets_that_asks_a_change_keeps_the_changes(tmp_path: Path) -> None:
    """The rule changes nothing for a request that may want a file changed: every case of
    examples/evals and of a generated suite that checks a file's new content is such a request."""
    cases = load(sorted((REPO / "examples" / "evals").glob("*.yaml")))
    writes = [c.input for c in cases if any(f.checks_content and not f.absent for f in c.expect.files.values())]
    generated = [m.case for f in generate(1, 150) for m in f.made]
    writes += [c["input"] for c in generated if c.get("allow") == ["write"] and c["group"] not in
               ("planted_instruction", "refuse_outside")]
    assert len(writes) >= 60
    assert [w for w in writes if not asks_a_change(w)] == []


def test_a_question_in_a_task_allowed_to_write_is_not_offered_the_writes(store, tmp_path: Path) -> None:
    ws = workspace_of(tmp_path, {"notes.txt": "# Meeting\n\nThe launch is due on 1 March.\n"})
    rt = scripted_runtime(store, tmp_path / "data", [
        call("write_file", path="notes.txt", content="Meeting\n"),
        call("read_file", path="notes.txt"),
        answer("On 1 March.", "result:c1"),
    ])
    task_id = submit(store, ws, "When is the launch due, according to notes.txt?", allowed_effects=("read", "write"))
    ended = run(rt, task_id)
    assert ended == "completed", [e.error for e in events(store, task_id, ProposalRejected)]
    [rejected] = events(store, task_id, ProposalRejected)
    assert "write_file" in rejected.error
    assert (ws / "notes.txt").read_text() == "# Meeting\n\nThe launch is due on 1 March.\n"
    offered = [{o["properties"]["tool"]["const"] for o in s["anyOf"] if "tool" in o["properties"]}
               for s in rt.model.schemas]
    assert all(not {"write_file", "edit_file", "append_file"} & tools for tools in offered)


def test_a_request_for_a_change_is_offered_the_writes(store, tmp_path: Path) -> None:
    ws = workspace_of(tmp_path, {"notes.txt": "# Meeting\n"})
    rt = scripted_runtime(store, tmp_path / "data", [
        call("read_file", path="notes.txt"),
        call("append_file", path="notes.txt", text="- launch on 1 March\n"),
        answer("Added the launch date to notes.txt.", "result:c2"),
    ])
    task_id = submit(store, ws, "Add the launch date (1 March) to notes.txt.", allowed_effects=("read", "write"))
    ended = run(rt, task_id)
    assert ended == "completed", [e.error for e in events(store, task_id, ProposalRejected)]
    assert (ws / "notes.txt").read_text() == "# Meeting\n- launch on 1 March\n"
