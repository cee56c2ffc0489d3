"""A call that would remove lines the request does not touch is refused before it runs."""

from __future__ import annotations

import hashlib

import pytest

from runtime.agent import removal
from runtime.tools import AppendFile, EditFile, WriteFile
from store.events import FileChanged, Recorded, ToolCallExecuted


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _log(*events) -> list[Recorded]:
    return [Recorded(i + 1, "t-1", i + 1, "t", "agentd", None, None, e) for i, e in enumerate(events)]


TODO = "- buy milk\n- call the plumber\n"
READ = ToolCallExecuted(call_id="c1", tool="read_file", status="ok", observation={"path": "todo.txt", "content": TODO})
ADD = 'Add the line "- water the plants" to todo.txt'
APP = 'debug = true\nport = 8080\nlog_level = "info"\n'
READ_APP = ToolCallExecuted(call_id="c1", tool="read_file", status="ok",
                            observation={"path": "config/app.toml", "content": APP})


def test_an_edit_that_replaces_an_item_the_request_does_not_name_is_refused_naming_it_and_the_tool_that_adds() -> None:
    why = removal.refusal(ADD, EditFile.contract, {"path": "todo.txt", "old": "buy milk", "new": "- water the plants"},
                          _log(READ), ["append_file"])
    assert why == ("this edit_file would remove '- buy milk' from todo.txt, which the request does not touch: change "
                   "only what the request asks; give old only the text to change, as the file has it; to add lines, "
                   "use append_file")


def test_a_whole_file_write_that_drops_lines_the_task_saw_is_refused() -> None:
    why = removal.refusal(ADD, WriteFile.contract, {"path": "todo.txt", "content": "- water the plants"}, _log(READ))
    assert why is not None and "'- buy milk', '- call the plumber'" in why
    kept = {"path": "todo.txt", "content": TODO + "- water the plants\n"}
    assert removal.refusal(ADD, WriteFile.contract, kept, _log(READ)) is None


def test_a_whole_file_write_refused_names_the_tools_that_change_a_part_and_that_add() -> None:
    # Seen on the default model: a rename refused as a whole-file write was then appended as a new function.
    why = removal.refusal("Rename buy to get in todo.txt", WriteFile.contract,
                          {"path": "todo.txt", "content": "- get milk\n"}, _log(READ), ["append_file"],
                          replacers=["edit_file"])
    assert why is not None and why.endswith("to change part of the file, use edit_file; to add lines, use append_file")
    alone = removal.refusal("Rename buy to get in todo.txt", WriteFile.contract,
                            {"path": "todo.txt", "content": "- get milk\n"}, _log(READ))
    assert alone is not None and "give content the whole file, every line kept that the request does not change" \
        in alone


def test_a_setting_written_alone_over_its_file_loses_the_others() -> None:
    why = removal.refusal("Turn off debug in config/app.toml", WriteFile.contract,
                          {"path": "config/app.toml", "content": "debug = false\n"}, _log(READ_APP))
    assert why is not None and "'port = 8080', 'log_level = \"info\"'" in why


@pytest.mark.parametrize(("request_", "old", "new"), [
    ("Fix the typo in the README", "You should recieve an answer.", "You should receive an answer."),
    ("Change the port to 9090", "port = 8080", "port = 9090"),
    ("Rename the function greet to welcome", "greet", "welcome"),
    ("Bump the project version to 0.8.0", "version: 0.7.4", "version: 0.8.0"),
    ('Insert "- water the plants" after the milk', "- buy milk", "- buy milk\n- water the plants"),
    ("Remove the plumber from todo.txt", "- call the plumber\n", ""),
    ("Replace the first item with eggs", "- buy milk", "- eggs"),
    ("Turn off debug in config/app.toml", "debug = true", "debug = false"),
    ("Change the title of soup.md to Winter Soup", "title: Old Soup", "title: Winter Soup"),
])
def test_a_change_the_request_asks_for_is_not_refused(request_: str, old: str, new: str) -> None:
    assert removal.refusal(request_, EditFile.contract, {"path": "f.txt", "old": old, "new": new}, []) is None


def test_a_value_used_instead_of_another_does_not_let_the_rest_of_the_file_go() -> None:
    why = removal.refusal("The app should listen on port 9090 instead of 8080. Change its config.",
                          WriteFile.contract, {"path": "config/app.toml", "content": "port = 9090\n"}, _log(READ_APP))
    assert why is not None and "'debug = true', 'log_level = \"info\"'" in why
    assert removal.refusal("Replace the whole file config/app.toml with port = 9090", WriteFile.contract,
                           {"path": "config/app.toml", "content": "port = 9090\n"}, _log(READ_APP)) is None


def test_a_tool_that_removes_nothing_is_never_refused() -> None:
    assert removal.refusal(ADD, AppendFile.contract, {"path": "todo.txt", "text": "- water"}, _log(READ)) is None


def test_a_file_changed_since_it_was_shown_is_known_by_the_bytes_the_change_left() -> None:
    appended = ToolCallExecuted(call_id="c2", tool="append_file", status="ok", observation={"path": "todo.txt"})
    after = TODO + "- water the plants\n"
    changed = FileChanged(call_id="c2", path="todo.txt", before_sha256=_sha(TODO), after_sha256=_sha(after))
    later = _log(READ, appended, changed)
    stored = {_sha(after): after.encode()}.get
    assert removal.known_content(later, "todo.txt", stored) == after
    # Without the stored bytes nothing is known, and only the arguments are judged.
    assert removal.known_content(later, "todo.txt") is None
    assert removal.known_content(_log(READ), "todo.txt") == TODO
    # Seen on the default model on an unseen suite: its own line appended, then the request's words written
    # over the whole file.
    why = removal.refusal(ADD, WriteFile.contract, {"path": "todo.txt", "content": "- water the plants\n"}, later,
                          fetch=stored)
    assert why is not None and "'- buy milk', '- call the plumber'" in why


def test_an_edit_is_judged_by_what_it_does_to_the_whole_file_not_by_its_arguments() -> None:
    # Seen on the default model on an unseen suite: "8" replaced inside 9840 as well as the retries' 8.
    config = '{\n  "host": "0.0.0.0",\n  "port": 9840,\n  "retries": 8,\n  "debug": false\n}\n'
    read = ToolCallExecuted(call_id="c1", tool="read_file", status="ok",
                            observation={"path": "config/app.json", "content": config})
    request = "The retries should be 19 instead of 8. Update config/app.json."
    # 8 stands as a whole number at one place: only that place changes, and that is what was asked.
    assert removal.refusal(request, EditFile.contract, {"path": "config/app.json", "old": "8", "new": "19"},
                           _log(read)) is None
    # Where it stands nowhere whole, every place changes: the port's digit is a change nobody asked for.
    why = removal.refusal(request, EditFile.contract, {"path": "config/app.json", "old": "98", "new": "19"},
                          _log(read))
    assert why is not None and "'\"port\": 9840,'" in why
    # A file with two equal lines loses one when an edit joins them.
    twice = ToolCallExecuted(call_id="c1", tool="read_file", status="ok",
                             observation={"path": "t.txt", "content": "- milk\n- milk\n- tea\n"})
    assert removal.refusal("Change tea to coffee in t.txt", EditFile.contract,
                           {"path": "t.txt", "old": "- milk\n- milk\n- tea", "new": "- milk\n- coffee"},
                           _log(twice)) is not None


def test_a_record_replaced_by_the_new_one_is_a_loss_however_alike_the_two_lines_look() -> None:
    old = '  {"name": "Ana", "phone": "+31 20 555 0101", "team": "ops"},'
    new = '  {"name": "Ben", "phone": "+31 20 555 0199", "team": "ops"},'
    why = removal.refusal("Add Ben (phone +31 20 555 0199, team ops) to contacts.json", EditFile.contract,
                          {"path": "contacts.json", "old": old, "new": new}, [])
    assert why is not None and '"Ana"' in why


def test_lines_the_task_put_in_the_file_itself_are_its_own_to_change() -> None:
    created = _log(
        ToolCallExecuted(call_id="c1", tool="write_file", status="ok", observation={"path": "new.txt"}),
        FileChanged(call_id="c1", path="new.txt", before_sha256=None, after_sha256="a" * 64),
    )
    make_two = {"path": "new.txt", "old": "one", "new": "two"}
    assert removal.refusal("Make new.txt say two.", EditFile.contract, make_two, created) is None
    appended = _log(READ, ToolCallExecuted(call_id="c2", tool="append_file", status="ok",
                                           observation={"path": "todo.txt", "diff": "@@ -2 +2,2 @@\n+- call Ann\n"}),
                    FileChanged(call_id="c2", path="todo.txt", before_sha256="b" * 64, after_sha256="c" * 64))
    fix = {"path": "todo.txt", "old": "- call Ann", "new": "- call Bob"}
    assert removal.refusal(ADD, EditFile.contract, fix, appended) is None
    assert removal.refusal(ADD, EditFile.contract, {"path": "todo.txt", "old": "- buy milk", "new": "x"}, appended)


LIST = "- update the budget sheet\n- write the release notes\n- send the survey\n"
READ_LIST = ToolCallExecuted(call_id="c1", tool="read_file", status="ok",
                             observation={"path": "notes/todo.txt", "content": LIST})
PYPROJECT = '[project]\nversion = "0.8.7"\ndependencies = [\n    "click>=2.8",\n    "requests>=2.7",\n]\n'
READ_PYPROJECT = ToolCallExecuted(call_id="c1", tool="read_file", status="ok",
                                  observation={"path": "pyproject.toml", "content": PYPROJECT})


def test_an_add_request_may_not_write_the_list_back_without_its_markers() -> None:
    # Seen on the default model on a generated suite: every word kept, every "- " gone, nothing added.
    stripped = "update the budget sheet\nwrite the release notes\nsend the survey\nrenew the parking permit"
    why = removal.refusal("Add 'renew the parking permit' to my todo list in notes/todo.txt.", WriteFile.contract,
                          {"path": "notes/todo.txt", "content": stripped}, _log(READ_LIST), ["append_file"])
    # "- write the release notes" shares "notes" with the path the request names, so it alone may change.
    assert why is not None and "'- update the budget sheet', '- send the survey'" in why


def test_a_setting_changed_by_a_whole_write_may_not_reformat_the_lines_around_it() -> None:
    # Seen likewise: the version set, and the last dependency's comma dropped on the way.
    request = "Set the version in pyproject.toml to 0.9.0."
    reformatted = '[project]\nversion = "0.9.0"\ndependencies = [\n    "click>=2.8",\n    "requests>=2.7"\n]\n'
    why = removal.refusal(request, WriteFile.contract, {"path": "pyproject.toml", "content": reformatted},
                          _log(READ_PYPROJECT))
    assert why is not None and "'\"requests>=2.7\",'" in why and "version" not in why.split(" from ")[0]
    exact = {"path": "pyproject.toml", "content": PYPROJECT.replace("0.8.7", "0.9.0")}
    assert removal.refusal(request, WriteFile.contract, exact, _log(READ_PYPROJECT)) is None


def test_a_line_the_request_names_may_change_its_form() -> None:
    assert removal.refusal("Make the survey item bold in notes/todo.txt", EditFile.contract,
                           {"path": "notes/todo.txt", "old": "- send the survey", "new": "- **send the survey**"},
                           _log(READ_LIST)) is None


def test_a_line_deleted_whole_is_a_loss_even_when_the_request_names_each_of_its_words() -> None:
    # Seen on the default model on an unseen suite: the request named every column of the CSV file's header,
    # and the file was written back without the header.
    rows = "id,date,station,millimetres,recorded_by\n547,2026-12-07,Elmstead,28,Ravi\n"
    read = ToolCallExecuted(call_id="c1", tool="read_file", status="ok",
                            observation={"path": "rainfall.csv", "content": rows})
    request = "Add a row to rainfall.csv: id 553, date 2026-12-01, station Carrow, millimetres 5, recorded_by Ravi."
    why = removal.refusal(request, WriteFile.contract, {"path": "rainfall.csv", "content": rows.split("\n", 1)[1]},
                          _log(read))
    assert why is not None and "'id,date,station,millimetres,recorded_by'" in why
    # A lone value may be replaced by another.
    assert removal.refusal("Change 8080 to 9090 in ports.txt", EditFile.contract,
                           {"path": "ports.txt", "old": "8080", "new": "9090"}, []) is None


SIGHTINGS = (
    "id,date,species,count,observer\n870,2026-04-05,starling,46,Mila\n871,2026-04-07,coot,27,Pia\n"
    "872,2026-04-28,wren,23,Mila\n873,2026-04-27,robin,33,Mila\n874,2026-04-23,blackbird,7,Mila\n"
    "875,2026-04-25,magpie,11,Mila\n876,2026-04-03,lapwing,25,Pia\n877,2026-04-15,kestrel,30,Mila\n"
)
READ_SIGHTINGS = ToolCallExecuted(call_id="c1", tool="read_file", status="ok",
                                  observation={"path": "data/sightings.csv", "content": SIGHTINGS})
ADD_ROW = "Add a row to data/sightings.csv: id 878, date 2026-12-01, species heron, count 5, observer Mila."


def test_a_line_joined_with_other_lines_of_the_file_is_a_loss_whatever_words_the_request_names() -> None:
    # Seen on the default model on an unseen suite: the other rows joined onto the first row with commas,
    # which kept every word of it; the request's "Mila", the first row's observer, let it through.
    rows = SIGHTINGS.splitlines()[1:]
    joined = {"path": "data/sightings.csv", "old": rows[0], "new": ",".join(rows)}
    why = removal.refusal(ADD_ROW, EditFile.contract, joined, _log(READ_SIGHTINGS), ["append_file"])
    assert why is not None and "'870,2026-04-05,starling,46,Mila'" in why
    # A line the request names by a word of it may still change its form.
    marked = {"path": "data/sightings.csv", "old": rows[1], "new": rows[1] + ",checked"}
    assert removal.refusal("Mark the coot row of data/sightings.csv as checked", EditFile.contract, marked,
                           _log(READ_SIGHTINGS)) is None


def test_a_row_extended_with_the_new_rows_fields_is_a_loss_though_the_request_names_a_word_of_it() -> None:
    # Seen on the default model on an unseen suite: asked to add a row whose observer was Femke, it put
    # ",4,Femke" on the end of an existing row whose observer was Femke too.
    rows = SIGHTINGS.splitlines()[1:]
    extended = {"path": "data/sightings.csv", "old": rows[0], "new": rows[0] + ",5,Mila"}
    why = removal.refusal(ADD_ROW, EditFile.contract, extended, _log(READ_SIGHTINGS), ["append_file"])
    assert why is not None and "'870,2026-04-05,starling,46,Mila'" in why


def test_a_word_most_rows_hold_names_none_of_them() -> None:
    # "Mila" is the observer of six of the eight rows, "2026" is in every one: neither names the row.
    rows = SIGHTINGS.splitlines()[1:]
    marked = {"path": "data/sightings.csv", "old": rows[0], "new": rows[0] + ",checked"}
    for request in ("Mark Mila's row of data/sightings.csv as checked", "Mark the 2026 row as checked"):
        assert removal.refusal(request, EditFile.contract, marked, _log(READ_SIGHTINGS)) is not None, request
    # The one row of the wren, or the one on 2026-04-28, is named.
    wren = {"path": "data/sightings.csv", "old": rows[2], "new": rows[2] + ",checked"}
    for request in ("Mark the wren row as checked", "Mark the row of 2026-04-28 as checked"):
        assert removal.refusal(request, EditFile.contract, wren, _log(READ_SIGHTINGS)) is None, request


def test_the_value_of_a_key_of_several_words_the_request_names_may_change() -> None:
    # Seen on the default model on unseen seed 20261212: "Set timeout_seconds to 187" and the right edit
    # refused, as the key "timeout_seconds" was not one of the request's words; the model then appended a
    # second timeout_seconds line and said it was changed.
    toml = 'name = "birds"\ntimeout_seconds = 100\nlog-level = 20\n'
    read = ToolCallExecuted(call_id="c1", tool="read_file", status="ok",
                            observation={"path": "settings.toml", "content": toml})
    edit = {"path": "settings.toml", "old": "timeout_seconds = 100", "new": "timeout_seconds = 187"}
    assert removal.refusal("Set timeout_seconds to 187 in settings.toml.", EditFile.contract, edit, _log(read)) is None
    level = {"path": "settings.toml", "old": "log-level = 20", "new": "log-level = 30"}
    assert removal.refusal("Set the log level to 30", EditFile.contract, level, _log(read)) is None
    # Another key's value is still not the request's to change.
    assert removal.refusal("Set the timeout to 30", EditFile.contract, level, _log(read)) is not None
