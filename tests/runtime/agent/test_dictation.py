"""A call that would put a text the request dictates in a file, but not as given, is refused once."""

from __future__ import annotations

import pytest

from runtime.agent import dictation
from runtime.tools import AppendFile, EditFile, WriteFile
from store.events import Recorded, ToolCallExecuted

SENTENCE = "Create a file hello.txt that says: birddesk is ready for review."
TODO = "- buy milk\n- call the plumber\n"
READ_TODO = ToolCallExecuted(call_id="c1", tool="read_file", status="ok",
                             observation={"path": "todo.txt", "content": TODO})


def _log(*events) -> list[Recorded]:
    return [Recorded(i + 1, "t-1", i + 1, "t", "agentd", None, None, e) for i, e in enumerate(events)]


def test_a_dictated_sentence_written_without_its_stop_is_refused_with_the_sentence_as_given() -> None:
    # Seen on the default model on seeds 20261215 and 20261216: the sentence without its stop, completed.
    written = {"path": "hello.txt", "content": "birddesk is ready for review"}
    why = dictation.refusal(WriteFile.contract, written, [], SENTENCE)
    assert why == (
        'this write_file would put "birddesk is ready for review" in hello.txt, but the request dictates '
        '"birddesk is ready for review.": write it exactly as the request gives it'
    )
    # Once: a second call that still differs is let through.
    assert dictation.refusal(WriteFile.contract, written, [], SENTENCE, last_rejection=why) is None


@pytest.mark.parametrize(("tool", "arguments"), [
    (WriteFile, {"path": "hello.txt", "content": "Birddesk is ready for review.\n"}),
    (WriteFile, {"path": "hello.txt", "content": "Status:  birddesk is   ready for review!"}),
    (AppendFile, {"path": "todo.txt", "text": "- Water the plants\n"}),
    (EditFile, {"path": "todo.txt", "old": "- call the plumber", "new": "- call the plumber\n- water the  plants"}),
])
def test_a_dictated_text_in_another_case_spacing_or_stop_is_refused(tool, arguments) -> None:
    request = SENTENCE if tool is WriteFile else "Add 'water the plants' to todo.txt"
    assert dictation.refusal(tool.contract, arguments, _log(READ_TODO), request) is not None


@pytest.mark.parametrize(("request_", "arguments"), [
    # As given, alone or inside a longer line.
    (SENTENCE, {"path": "hello.txt", "content": "birddesk is ready for review.\n"}),
    ("Add 'water the plants' to todo.txt", {"path": "todo.txt", "content": TODO + "- water the plants\n"}),
    # Not the dictated text at all: another check's business, not this one's.
    (SENTENCE, {"path": "hello.txt", "content": "Hello!\n"}),
    # A word that holds the text is not the text: "Mila" in "Camila".
    ("Create CONTRIBUTORS.txt listing 'Mila' and 'Joost'.", {"path": "CONTRIBUTORS.txt", "content": "Camila\nJoost\n"}),
    # A request that dictates nothing.
    ("Create hello.txt for the release.", {"path": "hello.txt", "content": "ready"}),
])
def test_a_text_as_given_or_no_dictated_text_at_all_is_let_through(request_: str, arguments: dict) -> None:
    assert dictation.refusal(WriteFile.contract, arguments, _log(READ_TODO), request_) is None


def test_only_the_lines_a_call_puts_in_are_held_to_it() -> None:
    # The file's own line, loosely like the text, is not the call's doing: the edit keeps it as it was.
    read = ToolCallExecuted(call_id="c1", tool="read_file", status="ok",
                            observation={"path": "todo.txt", "content": "- Water the plants\n- buy milk\n"})
    edit = {"path": "todo.txt", "old": "- buy milk", "new": "- buy oat milk"}
    assert dictation.refusal(EditFile.contract, edit, _log(read), "Add 'water the plants' to todo.txt") is None
