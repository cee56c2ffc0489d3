"""A call that would add lines its file already has is refused before it runs."""

from __future__ import annotations

from runtime.agent import repetition
from runtime.tools import AppendFile, EditFile, WriteFile
from store.events import Recorded, ToolCallExecuted

ROWS = "id,date,species,count,observer\n696,2026-03-16,magpie,21,Pia\n697,2026-03-22,swift,23,Pia\n"
READ = ToolCallExecuted(call_id="c1", tool="read_file", status="ok",
                        observation={"path": "sightings.csv", "content": ROWS})


def _log(*events) -> list[Recorded]:
    return [Recorded(i + 1, "t-1", i + 1, "t", "agentd", None, None, e) for i, e in enumerate(events)]


def test_an_append_that_copies_the_rows_it_read_is_refused_naming_them() -> None:
    # Seen on the default model on a generated suite: the file's rows appended again for "Add a row".
    copied = {"path": "sightings.csv", "text": "id, date, species, count, observer\n" + ROWS.split("\n", 1)[1]}
    why = repetition.refusal(AppendFile.contract, copied, _log(READ))
    assert why == ("this append_file would add '696,2026-03-16,magpie,21,Pia', '697,2026-03-22,swift,23,Pia' to "
                   "sightings.csv, which it already has: give text only the new lines the request asks for")


def test_new_lines_or_one_line_repeated_are_not_a_copy() -> None:
    new_row = {"path": "sightings.csv", "text": "705,2026-12-01,wren,5,Pia\n"}
    assert repetition.refusal(AppendFile.contract, new_row, _log(READ)) is None
    one_again = {"path": "sightings.csv", "text": "696,2026-03-16,magpie,21,Pia\n"}
    assert repetition.refusal(AppendFile.contract, one_again, _log(READ)) is None
    # Two repeated among many new ones add more than they copy.
    mostly_new = {"path": "sightings.csv", "text": ROWS.split("\n", 1)[1] + "".join(f"{n},x\n" for n in range(3))}
    assert repetition.refusal(AppendFile.contract, mostly_new, _log(READ)) is None


def test_a_file_not_known_or_a_tool_that_adds_nothing_is_not_judged() -> None:
    copied = {"path": "sightings.csv", "text": ROWS}
    assert repetition.refusal(AppendFile.contract, copied, []) is None
    assert repetition.refusal(WriteFile.contract, {"path": "sightings.csv", "content": ROWS * 2}, _log(READ)) is None
    assert repetition.refusal(EditFile.contract, {"path": "sightings.csv", "old": "x", "new": ROWS}, _log(READ)) is None
