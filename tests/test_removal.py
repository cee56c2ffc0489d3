"""A call that would remove lines from a file the request only asked to add to is refused before it runs."""

from __future__ import annotations

import pytest

from runtime.agent import removal
from runtime.tools import AppendFile, EditFile, WriteFile
from store.events import FileChanged, Recorded, ToolCallExecuted


@pytest.mark.parametrize("request_", [
    'Add the line "- water the plants" to todo.txt',
    "Append a new last line to todo.txt, keeping the existing lines",
    "Insert 'rice' after 'pasta' in pantry.md",
])
def test_a_request_to_add_only_adds(request_: str) -> None:
    assert removal.only_adds(request_)


@pytest.mark.parametrize("request_", [
    "Bump the project version to 0.8.0",
    "Replace 'buy milk' with 'buy oat milk' in todo.txt",
    "Add a line to todo.txt and remove the plumber",
    "What does the README say?",
])
def test_a_request_that_changes_or_only_reads_is_not_only_adding(request_: str) -> None:
    assert not removal.only_adds(request_)


def _log(*events) -> list[Recorded]:
    return [Recorded(i + 1, "t-1", i + 1, "t", "agentd", None, None, e) for i, e in enumerate(events)]


READ = ToolCallExecuted(call_id="c1", tool="read_file", status="ok",
                        observation={"path": "todo.txt", "content": "- buy milk\n- call the plumber\n"})
ADD = 'Add the line "- water the plants" to todo.txt'


def test_an_edit_that_replaces_an_item_in_an_add_request_is_refused_naming_the_line_and_the_tool_that_adds() -> None:
    why = removal.refusal(ADD, EditFile.contract, {"path": "todo.txt", "old": "buy milk", "new": "- water the plants"},
                          _log(READ), ["append_file"])
    assert why == ("this edit_file would remove 'buy milk' from todo.txt, which the request did not ask to remove: "
                   "to add lines, use append_file")


def test_an_edit_that_keeps_its_old_text_and_an_append_are_not_refused() -> None:
    inserted = {"path": "todo.txt", "old": "- buy milk", "new": "- buy milk\n- water the plants"}
    assert removal.refusal(ADD, EditFile.contract, inserted, _log(READ)) is None
    assert removal.refusal(ADD, AppendFile.contract, {"path": "todo.txt", "text": "- water"}, _log(READ)) is None


def test_a_whole_file_write_that_drops_lines_the_task_saw_is_refused() -> None:
    why = removal.refusal(ADD, WriteFile.contract, {"path": "todo.txt", "content": "- water the plants"}, _log(READ))
    assert why is not None and "'- buy milk', '- call the plumber'" in why
    kept = {"path": "todo.txt", "content": "- buy milk\n- call the plumber\n- water the plants\n"}
    assert removal.refusal(ADD, WriteFile.contract, kept, _log(READ)) is None


def test_a_file_changed_since_it_was_shown_is_not_known_so_a_write_is_not_judged() -> None:
    appended = ToolCallExecuted(call_id="c2", tool="append_file", status="ok", observation={"path": "todo.txt"})
    changed = FileChanged(call_id="c2", path="todo.txt", before_sha256="a" * 64, after_sha256="b" * 64)
    assert removal.known_content(_log(READ, appended, changed), "todo.txt") is None
    assert removal.known_content(_log(READ), "todo.txt") == "- buy milk\n- call the plumber\n"
