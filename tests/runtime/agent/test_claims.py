"""What an answer claims: a change reported as made is found in the wording; checked against the events."""

from __future__ import annotations

import hashlib

import pytest

from runtime.agent import claims, context
from store.events import FileChanged, Recorded, TaskSubmitted, ToolCallExecuted, ToolCallStarted, UserSaid


@pytest.mark.parametrize("answer", [
    "The project version was bumped to 0.8.0.",
    "todo.txt has been updated.",
    "I added the line to todo.txt.",
    "Created CONTRIBUTORS.txt listing Mila and Joost.",
    "The file was successfully updated; the size increased.",
    "I've renamed greet to welcome in src/app.py.",
    "Done: the port is now set to 9090.",
    "Based on the file, the request was successfully processed.",
    "Your request has been completed.",
    "Task completed.",
    "I have carried out the requested change to config.ini.",
])
def test_a_reported_change_is_a_claim(answer: str) -> None:
    assert claims.claimed_change(answer) is not None


@pytest.mark.parametrize("answer", [
    "The version could not be bumped: settings.yaml has 0.7.1, not 0.7.0.",
    "Nothing was changed because the text 0.7.0 is not in the file.",
    "The file already says 8080, so it was not changed.",
    "The release is planned for March 3.",
    "To add the line, todo.txt would need to be writable.",
    "There are 3 items in todo.txt.",
    "The meeting decided that the offsite moves to January.",
    "I was unable to edit the file: it does not exist.",
    "The request could not be completed: todo.txt is missing.",
    "The task list has 3 open items and 2 finished ones.",
    "Two of the tasks in todo.txt are marked done.",
])
def test_a_statement_a_refusal_or_a_plan_is_not_a_claim(answer: str) -> None:
    assert claims.claimed_change(answer) is None


def _log(*events) -> list[Recorded]:
    return [Recorded(i + 1, "t-1", i + 1, "2026-12-04T00:00:00+00:00", "agentd", None, None, e)
            for i, e in enumerate(events)]


SUBMITTED = TaskSubmitted(goal="Bump the version", workspace="/ws", allowed_effects=("read", "write"))
SHA = "a" * 64


def test_a_claim_with_no_change_recorded_is_unbacked_and_names_the_failed_call() -> None:
    records = _log(
        SUBMITTED,
        ToolCallStarted(call_id="c1", tool="edit_file", idempotent=False, effects=("write",)),
        ToolCallExecuted(call_id="c1", tool="edit_file", status="error", observation={"error": "text_not_found"}),
    )
    why = claims.unbacked("The version was bumped to 0.8.0.", records)
    assert why == 'the answer says "The version was bumped to 0.8.0", but edit_file failed: text_not_found; ' \
                  "nothing was changed"


def test_a_claim_backed_by_a_recorded_change_or_an_outside_action_stands() -> None:
    changed = _log(SUBMITTED, FileChanged(call_id="c1", path="v.txt", before_sha256=SHA, after_sha256="b" * 64))
    assert claims.unbacked("The version was bumped.", changed) is None
    acted = _log(
        SUBMITTED,
        ToolCallStarted(call_id="c1", tool="rotate_api_key", idempotent=False, effects=("external", "write")),
        ToolCallExecuted(call_id="c1", tool="rotate_api_key", status="ok"),
    )
    assert claims.unbacked("I have created a new key.", acted) is None


def test_only_changes_since_the_users_latest_message_back_a_claim() -> None:
    records = _log(
        SUBMITTED,
        FileChanged(call_id="c1", path="v.txt", before_sha256=SHA, after_sha256="b" * 64),
        UserSaid(text="Now bump it again"),
    )
    assert claims.unbacked("I bumped it again.", records) is not None


HELPERS = b"def parse_records(items):\n    return items\n\n\ndef load(items):\n    return parse_records(items)\n"


def _changed(before: bytes, after: bytes) -> tuple[list[Recorded], dict]:
    digest = {b: hashlib.sha256(b).hexdigest() for b in (before, after)}
    records = _log(SUBMITTED, FileChanged(call_id="c1", path="helpers.py", before_sha256=digest[before],
                                          after_sha256=digest[after]))
    return records, {d: b for b, d in digest.items()}


def test_a_claim_of_text_taken_out_is_unbacked_when_every_change_only_added_lines() -> None:
    # Seen on the default model on an unseen suite: a second function appended under the new name, and the
    # answer that the function was renamed.
    appended, stored = _changed(HELPERS, HELPERS + b"def gather_records(items): return items\n")
    answer = "The function was renamed to gather_records and updated where it is called."
    why = claims.unbacked(answer, appended, stored.get)
    assert why is not None and why.endswith("nothing was changed")
    assert "only added lines to helpers.py" in why
    # Added lines back a claim of adding; a line replaced backs the rename.
    assert claims.unbacked("I added gather_records to helpers.py.", appended, stored.get) is None
    renamed, stored = _changed(HELPERS, HELPERS.replace(b"parse_records", b"gather_records"))
    assert claims.unbacked(answer, renamed, stored.get) is None
    # Without the bytes nothing is said.
    assert claims.unbacked(answer, appended) is None
    assert claims.unbacked(answer, appended, {}.get) is None


README = b"# tidy\n\nYou will recieve a mail.\nInstall: pip install tidy-tasks\n"


def test_a_claim_that_names_the_text_it_took_out_is_unbacked_when_that_text_is_still_there() -> None:
    # Seen on the default model (examples/evals fix_readme_typo): "corrected" answered with the typo still
    # in README.md, after an edit of another line.
    other, stored = _changed(README, README.replace(b"tidy-tasks", b"tidy_tasks"))
    answer = "I corrected 'recieve' to 'receive' in README.md."
    why = claims.unbacked(answer, other, stored.get)
    assert why is not None and why.endswith("nothing was changed"), why
    assert 'but helpers.py has "recieve" as often as before the task' in why
    fixed, stored_fixed = _changed(README, README.replace(b"recieve", b"receive"))
    assert claims.unbacked(answer, fixed, stored_fixed.get) is None
    # The other forms a report takes: "from X to Y", a quoted text after the verb.
    assert claims.unbacked("The typo was fixed by changing \"recieve\" to \"receive\".", other, stored.get)
    assert claims.unbacked("I fixed the typo `recieve` in README.md.", other, stored.get)
    assert claims.unbacked("The word was changed from recieve to receive.", other, stored.get)


TYPO_REQUEST = "README.md has a spelling mistake: 'recieve'. Please fix it."


@pytest.mark.parametrize("answer", ["The spelling mistake in README.md has been corrected.", "Task completed."])
def test_a_claim_naming_no_text_is_unbacked_while_the_text_the_request_asked_out_is_still_there(answer: str) -> None:
    # Seen on the default model (examples/evals fix_readme_typo): "The spelling mistake ... has been corrected"
    # after an edit that left the typo in place; it names no text, so only the request can tell what went.
    other, stored = _changed(README, README.replace(b"tidy-tasks", b"tidy_tasks"))
    why = claims.unbacked(answer, other, stored.get, TYPO_REQUEST)
    assert why is not None and 'has "recieve" as often as before the task' in why, why
    fixed, stored_fixed = _changed(README, README.replace(b"recieve", b"receive"))
    assert claims.unbacked(answer, fixed, stored_fixed.get, TYPO_REQUEST) is None
    assert claims.unbacked(answer, other, stored.get) is None


def test_a_claim_of_putting_text_in_is_not_held_to_what_the_request_asked_out() -> None:
    other, stored = _changed(README, README + b"- a new line\n")
    request = "Fix the typo 'recieve' in README.md and add the line '- a new line'."
    assert claims.unbacked("I added the line '- a new line' to README.md.", other, stored.get, request) is None


@pytest.mark.parametrize(("request_", "asked"), [
    ("README.md has a spelling mistake: 'recieve'. Please fix it.", [("recieve", None)]),
    ("Fix the typo \"teh\" in notes.md", [("teh", None)]),
    ("Please fix 'recieve' in README.md", [("recieve", None)]),
    ("Remove the line '- done' from todo.txt", [("- done", None)]),
    ("Change the port from 8080 to 9090", [("8080", "9090")]),
    ("Replace 'foo' with 'bar' in a.txt", [("foo", "bar")]),
    # A new text named: the pair is read, not the old text alone.
    ("Rename 'load' to 'load_all' in app.py", [("load", "load_all")]),
    # Nothing asked out: text put in, a setting named, a file named.
    ("Add the line '- water the plants' to todo.txt", []),
    ("Change the 'debug' setting to false", []),
    ("Fix the failing test in 'tests/test_app.py'", []),
])
def test_the_texts_a_request_asks_out(request_: str, asked: list) -> None:
    assert claims.asked_out(request_) == asked


def test_a_swap_whose_new_text_came_in_is_done_though_the_old_text_stays() -> None:
    config = b"debug = true\nport = 8080\n"
    done, stored = _changed(config, config.replace(b"true", b"false"))
    assert claims.unbacked("Task completed.", done, stored.get, "Set 'debug' to false in config.toml") is None
    assert claims.unbacked("I changed 'debug' to false.", done, stored.get) is None


@pytest.mark.parametrize("answer", [
    # A bare word before "to" is what changed, not what went out.
    "I bumped the version to 0.8.0 and fixed the install line.",
    # A text put in, not taken out.
    "I fixed the install line and added 'recieve' to the glossary.",
    # The new text holds the old one: its count cannot tell.
    "I replaced 'recieve' with 'recieve and read'.",
    # A text that was in no file the task changed.
    "I corrected 'teh' to 'the'.",
])
def test_a_claim_of_text_taken_out_that_the_files_cannot_contradict_stands(answer: str) -> None:
    other, stored = _changed(README, README.replace(b"tidy-tasks", b"tidy_tasks"))
    assert claims.unbacked(answer, other, stored.get) is None


def _ran(observation: dict, *after) -> list[Recorded]:
    return _log(
        SUBMITTED,
        ToolCallStarted(call_id="c1", tool="shell", idempotent=False, effects=("external",)),
        ToolCallExecuted(call_id="c1", tool="shell", status="ok", observation=observation),
        *after,
    )


PRINTED = {"exit_code": 0, "stdout": "checksum 13004\n", "stderr": "", "stdout_bytes": 15, "stderr_bytes": 0}


def test_an_answer_without_any_number_the_program_printed_says_nothing_of_it() -> None:
    records = _ran(PRINTED)
    why = claims.unquoted("The script was executed successfully and returned the exit code 0.", records)
    assert why == 'the answer does not say what shell printed: "checksum 13004"; answer with what it printed'
    assert claims.unquoted("It printed checksum 13004.", records) is None
    # A masked result keeps the tail of what was printed.
    masked = {"exit_code": 0, "stdout_bytes": 15, "stderr_bytes": 0, "stdout_tail": "checksum 13004\n"}
    assert claims.unquoted("The script ran.", _ran(masked)) is not None


@pytest.mark.parametrize("records", [
    # Nothing printed with a number in it; a long output is data to draw from, not to repeat.
    _ran({**PRINTED, "stdout": "all good\n"}),
    _ran({**PRINTED, "stdout": "row 1\n" * 100}),
    # A later call is what the answer stands on.
    _ran(PRINTED, ToolCallExecuted(call_id="c2", tool="read_file", status="ok", observation={"content": "x"})),
    # What ran before the user's latest message is not what this answer answers.
    _ran(PRINTED, UserSaid(text="Thanks. Anything else?")),
    _log(SUBMITTED),
])
def test_an_answer_is_not_held_to_output_it_does_not_stand_on(records) -> None:
    assert claims.unquoted("The script ran.", records) is None


def test_the_request_handed_back_is_a_restatement_and_an_answer_in_its_own_words_is_not() -> None:
    # Seen on the default model as whole answers on generated suites.
    request = "Copy the first item of my todo list (notes/todo.txt) into a new file next.txt."
    assert claims.restates(request, request)
    assert claims.restates("Copy the first item of my todo list (notes/next.txt) into a new file next.txt.", request)
    rename = "In helpers.py, rename the function parse_records to gather_records, and update where it is called."
    assert claims.restates("rename the function parse_records to gather_records, and update where it is called.",
                           rename)
    assert not claims.restates("I renamed the function parse_records to gather_records in helpers.py.", rename)
    assert not claims.restates("next.txt now holds the first item of the todo list: fix the login bug.", request)
    assert not claims.restates("Done.", "Done.")


def test_an_answer_made_of_a_tools_description_copies_it_and_one_that_shares_a_phrase_does_not() -> None:
    description = (
        "Create or replace one text file in the workspace with the given content, creating folders as needed. "
        "Writing the same content again changes nothing."
    )
    assert claims.copies("Create or replace one text file in the workspace with the given content.", [description])
    asked = ["one full sentence that answers it"]
    assert claims.copies("One full sentence that answers it: the version is 1.4.2", asked)
    assert not claims.copies("The file hello.txt was created in the workspace with the given content.", [description])


@pytest.mark.parametrize(
    "answer",
    ['{"status": "ok", "lines": 124}', ' [1, 2] ', '{"a": {"b": []}}', '{"thought": \\', '{ "path": "a.txt", "'],
)
def test_a_json_object_or_list_whole_or_cut_short_is_data_not_an_answer(answer: str) -> None:
    assert claims.is_data(answer)


@pytest.mark.parametrize(
    "answer",
    ['The file has {"status": "ok"}.', "{not json}", "42", '"quoted"', "[draft] done", "{name} stays as it was"],
)
def test_a_sentence_or_a_bare_value_is_an_answer(answer: str) -> None:
    assert not claims.is_data(answer)


def test_any_refusal_in_the_task_is_agentds_words_but_its_tool_name_alone_is_not() -> None:
    refusals = ["read_file was already called with exactly these arguments (call c1); its result is above.",
                "there is no tool 'grep' in this step; the tools are: read_file"]
    assert context.echoes_instructions("was already called with exactly these arguments (call c1)", refusals)
    assert not context.echoes_instructions("I used read_file to read todo.txt, which lists two items.", refusals)


CONFIG = b'{\n  "name": "birds",\n  "retries": 9,\n  "port": 9840\n}\n'


def test_a_claim_is_unbacked_while_no_line_gives_the_field_the_request_names_its_value() -> None:
    # Seen on the default model on an unseen suite: "Set retries to 11" turned `"retries": 9` into `"11": 9`,
    # and the answer said the settings were updated to include retries of 11.
    wrong, stored = _changed(CONFIG, CONFIG.replace(b'"retries"', b'"11"'))
    answer = "The configuration settings have been updated to include retries of 11."
    why = claims.unbacked(answer, wrong, stored.get, "Set retries to 11 in config/app.json")
    assert why is not None and why.endswith("nothing was changed"), why
    assert 'no line of helpers.py has "retries" with "11"' in why
    right, stored_right = _changed(CONFIG, CONFIG.replace(b"9,", b"11,"))
    assert claims.unbacked(answer, right, stored_right.get, "Set retries to 11 in config/app.json") is None
    # A value that only starts the same is not the value: 110 is not 11, 0.8.0 is not 0.8.
    near, stored_near = _changed(CONFIG, CONFIG.replace(b"9,", b"110,"))
    assert claims.unbacked(answer, near, stored_near.get, "Set retries to 11") is not None


@pytest.mark.parametrize(("request_", "asked"), [
    ("Set retries to 11 in config/app.json", [(("retries",), "11")]),
    ("Bump the project version to 0.8.0.", [(("project", "version"), "0.8.0")]),
    ("Change the log_level in settings.yaml to 3", [(("log", "level", "yaml"), "3")]),
    ("Increase the count for the heron row to 6", [(("count", "heron"), "6")]),
    # A swap, a text put in, a bare word, a value with no field named: nothing asked set.
    ("Change the port from 8080 to 9090", []),
    ("Change the heading to 'Release 2.0'", []),
    ("Set the log level to debug", []),
    ("Change 8080 to 9090", []),
    ("Rename parse2 to load2", []),
])
def test_the_fields_a_request_asks_a_value_for(request_: str, asked: list) -> None:
    assert claims.asked_set(request_) == asked


def test_a_field_no_changed_file_held_is_not_held_to_its_value() -> None:
    # The request's field is in no file the task changed: nothing can be said from these files.
    notes = b"- buy milk\n"
    changed, stored = _changed(notes, notes + b"- 11 apples\n")
    assert claims.unbacked("I updated the list.", changed, stored.get, "Set retries to 11") is None
    # Bumped where the file names the field in a word of its own: `version = "0.8.0"`.
    toml = b'[project]\nname = "tidy"\nversion = "0.7.4"\n'
    bumped, stored_bumped = _changed(toml, toml.replace(b"0.7.4", b"0.8.0"))
    assert claims.unbacked("The version was bumped to 0.8.0.", bumped, stored_bumped.get,
                           "Bump the project version to 0.8.0") is None


def test_a_value_put_in_beside_the_fields_old_one_is_not_the_field_set() -> None:
    # Seen on the default model on unseen seed 20261212: "Set timeout_seconds to 187" appended
    # `timeout_seconds = 187` under `timeout_seconds = 100`, and the task completed.
    toml = b'name = "birds"\ntimeout_seconds = 100\nretries = 6\n'
    request = "Set timeout_seconds to 187 in settings.toml."
    appended, stored = _changed(toml, toml + b"timeout_seconds = 187\n")
    why = claims.unbacked("The timeout_seconds setting has been updated to 187.", appended, stored.get, request)
    assert why is not None and 'has "timeout_seconds" on one more line than before' in why, why
    replaced, stored_replaced = _changed(toml, toml.replace(b"100", b"187"))
    assert claims.unbacked("The timeout_seconds setting has been updated to 187.", replaced, stored_replaced.get,
                           request) is None
    # A key set in two sections before (a port for the server, one for the database) is not one more.
    yaml = b"server:\n  port: 8080\ndatabase:\n  port: 5432\n"
    changed, stored_yaml = _changed(yaml, yaml.replace(b"8080", b"9090"))
    assert claims.unbacked("The server port was set to 9090.", changed, stored_yaml.get,
                           "Set the server port to 9090") is None


def test_a_field_is_named_by_a_settings_key_not_by_a_word_anywhere_in_a_line() -> None:
    # A CSV file names its columns in the header, and a row holds values only: no key says which is set.
    rows = b"id,date,species,count,observer\n870,2026-04-05,heron,5,Mila\n"
    changed, stored = _changed(rows, rows.replace(b"heron,5", b"heron,6"))
    assert claims.unbacked("The count was changed to 6.", changed, stored.get,
                           "Change the count of herons on 2026-04-05 to 6") is None
    # A settings file's key does.
    config = b"[server]\nport = 8080\n"
    wrong, stored_wrong = _changed(config, config + b"# port 9090\n")
    assert claims.unbacked("The port was changed to 9090.", wrong, stored_wrong.get,
                           "Change the port in config/app.toml to 9090") is not None


@pytest.mark.parametrize(("answer", "handed_back"), [
    ("renew the parking permit", True),
    ("'Renew the parking permit.'", True),
    ("I added 'renew the parking permit' to notes/todo.txt.", False),
    ("renew the parking", False),
])
def test_a_text_the_request_quotes_handed_back_whole_is_no_answer(answer: str, handed_back: bool) -> None:
    request = "Add 'renew the parking permit' to my todo list in notes/todo.txt."
    assert claims.quotes_back(answer, request) is handed_back


@pytest.mark.parametrize("answer", [
    "timeout_seconds changed: 1 line added, 0 lines removed",
    "todo.txt updated.",
    "config/settings.toml changed (1 line).",
    "The file notes/todo.txt updated, as asked.",
])
def test_a_change_reported_in_a_notes_style_is_a_claim(answer: str) -> None:
    # Seen on the default model on seed 20261212 as the whole answer after a second `timeout_seconds` line
    # had been appended under the first: no claim was read, so no check ran on it.
    assert claims.claimed_change(answer) is not None


@pytest.mark.parametrize("answer", [
    "The final answer is the modified src/birdlog/stats.py file.",
    "Here is the updated todo.txt with the new item.",
    "The corrected file is ready.",
])
def test_a_file_named_by_the_change_made_to_it_is_a_claim(answer: str) -> None:
    # Seen on the default model on seed 20261215 as the whole answer to a rename that changed nothing:
    # no claim was read, so the task completed.
    assert claims.claimed_change(answer) is not None


@pytest.mark.parametrize("answer", [
    "The updated figures show 14 sightings.",
    "The modified date of notes.txt is not recorded.",
    "The file was not modified: the updated config.yaml was never written.",
])
def test_a_participle_before_no_file_or_under_a_negation_is_no_claim(answer: str) -> None:
    assert claims.claimed_change(answer) is None


@pytest.mark.parametrize("answer", [
    "Sales increased.",
    "todo.txt not changed: the line was already there.",
    "Prices changed a lot last year.",
])
def test_a_noun_and_a_verb_alone_are_not_a_note_of_a_change(answer: str) -> None:
    assert claims.claimed_change(answer) is None


@pytest.mark.parametrize(("request_", "asked"), [
    ("Add 'water the plants' to my todo list in notes/todo.txt.", ["water the plants"]),
    ('Append a new item "plan the picnic" to notes/todo.txt, keeping the others.', ["plan the picnic"]),
    ('Add the line "- water the plants" to todo.txt', ["- water the plants"]),
    ("Create CONTRIBUTORS.txt listing 'Mila' and 'Joost'.", ["Mila", "Joost"]),
    ("Create a file hello.txt that says: Hello from the team!", ["Hello from the team!"]),
    ("Write a new file status.txt with the line: birdlog is ready for review.", ["birdlog is ready for review."]),
    ("Make docs/welcome.md containing exactly this sentence: Remember to back up on Fridays.",
     ["Remember to back up on Fridays."]),
    ("Write a file greeting.txt that says 'Hi there'", ["Hi there"]),
    # A quote that names what to run, read or take out, or a colon that opens a question, is no text put in.
    ("Create out.txt with the output of 'python3 app.py'", []),
    ("Fix the typo 'recieve' in README.md", []),
    ("Fix the misspelt word 'seperate' in README.md.", []),
    ("Change the heading text to 'Release 2.0'", []),
    ("Rename 'load' to 'load_all' in app.py", []),
    ("Make a file people.txt listing the names in the observer column of data/sightings.csv", []),
    ("Create a summary of notes.md: what was decided?", []),
    ("Remove the line '- done' from todo.txt and make sure 'x' is gone too.", []),
])
def test_the_texts_a_request_dictates_a_file_is_to_hold(request_: str, asked: list) -> None:
    assert claims.asked_in(request_) == asked


def test_a_claim_is_unbacked_while_no_changed_file_holds_the_text_the_request_dictates() -> None:
    # Seen on the default model on unseen seed 20261213: a new file written with a line of the model's own
    # making instead of the sentence asked for, and an answer that the file was created.
    request = "Create a file status.txt that says: birdlog is ready for review."
    answer = "Created status.txt."
    wrong, stored = _changed(b"", b"Status: ready\n")
    why = claims.unbacked(answer, wrong, stored.get, request)
    assert why is not None and why.endswith("nothing was changed"), why
    assert 'holds "birdlog is ready for review."' in why
    # The sentence there, in another case or with the request's stop left off, is the text put in.
    for held in (b"birdlog is ready for review.\n", b"Birdlog is ready  for review\n"):
        right, stored_right = _changed(b"", held)
        assert claims.unbacked(answer, right, stored_right.get, request) is None, held
    # A request that dictates nothing holds a claim to nothing more than the change.
    assert claims.unbacked(answer, wrong, stored.get, "Create status.txt for the release.") is None


def test_an_answer_is_checked_reading_each_changed_files_bytes_once() -> None:
    # Three checks (text still there, a field's value, a dictated text) read the same files' bytes.
    request = "Set retries to 11 in config.yaml, fix the typo 'recieve', and add the line 'done' to it."
    records, stored = _changed(b"retries: 9\nrecieve\n", b"retries: 11\nreceive\ndone\n")
    asked: list[str] = []

    def fetch(sha256: str) -> bytes | None:
        asked.append(sha256)
        return stored.get(sha256)

    assert claims.unbacked("I updated config.yaml and fixed the typo.", records, fetch, request) is None
    assert sorted(asked) == sorted(stored), asked
