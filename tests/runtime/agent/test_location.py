"""A request that asks which file holds something is answered with a file the task's calls reported."""

from __future__ import annotations

import re

import pytest

from runtime.agent import context, location, proposal
from runtime.inference.grammar import schema_grammar
from store.events import ProposalRejected, Recorded, TaskSubmitted, ToolCallExecuted, UserSaid


def _log(*events) -> list[Recorded]:
    return [Recorded(i + 1, "t-1", i + 1, "2026-12-08T00:00:00+00:00", "agentd", None, None, e)
            for i, e in enumerate(events)]


SUBMITTED = TaskSubmitted(goal="Which file says where the nightly backups go?", workspace="/ws",
                          allowed_effects=("read",))
LISTED = ToolCallExecuted(call_id="c1", tool="list_files", status="ok", observation={
    "path": ".", "count": 2, "omitted": 0,
    "entries": [{"path": "ops", "kind": "dir"}, {"path": "README.md", "kind": "file", "size": 9}],
})
SEARCHED = ToolCallExecuted(call_id="c2", tool="search", status="ok", observation={
    "query": "nightly backups", "files_indexed": 5, "files_left_out": 0,
    "matches": [{"path": "ops/storage-notes.md", "line": 3, "text": "Nightly backups go to Northwind Storage."}],
})


@pytest.mark.parametrize("request_", [
    "Which file says where the nightly backups go?",
    "One of the files mentions Northwind Storage. Which one?",
    "Where is it written that backups go to Northwind Storage?",
    "In which config file is the port set?",
    "Which of the files lists the team?",
    "Where does this project keep its release notes?",
    "Where is the retry limit configured?",
])
def test_a_request_for_the_file_that_holds_something_asks_for_a_file(request_: str) -> None:
    assert location.asks_for_file(request_)


@pytest.mark.parametrize("request_", [
    "Where do the nightly backups go?",
    "What is in the file notes.txt?",
    "What does the file config.yaml set the port to?",
    "Which one of the orders is the largest?",
    "How many files are directly in the src folder?",
])
def test_a_request_for_what_a_file_holds_does_not_ask_for_a_file(request_: str) -> None:
    assert not location.asks_for_file(request_)


def test_paths_are_those_the_calls_reported_at_any_depth() -> None:
    assert location.seen_paths(_log(SUBMITTED, LISTED, SEARCHED)) == ["ops", "README.md", "ops/storage-notes.md"]
    read = ToolCallExecuted(call_id="c3", tool="read_file", status="ok",
                            observation={"path": "ops/storage-notes.md", "content": "..."})
    assert location.seen_paths(_log(SUBMITTED, LISTED, read))[0] == "ops/storage-notes.md", "a file read comes first"


def test_an_answer_with_what_the_file_says_instead_of_its_name_is_refused() -> None:
    # Seen on the default model on unseen seed 20261218, 7 times in 8 such cases.
    why = location.unnamed("Northwind Storage", SUBMITTED.goal, _log(SUBMITTED, LISTED, SEARCHED))
    assert why == (
        "the request asks which file; the answer names none of the files your calls reported "
        "(ops, README.md, ops/storage-notes.md); answer with the path of the file that says it"
    )


@pytest.mark.parametrize("answer", [
    "ops/storage-notes.md says so.",
    "It is written in storage-notes.md.",
    "The file `ops/storage-notes.md`.",
    "None of the files do; README.md does not mention backups.",
])
def test_an_answer_naming_a_reported_file_may_stand(answer: str) -> None:
    assert location.unnamed(answer, SUBMITTED.goal, _log(SUBMITTED, LISTED, SEARCHED)) is None


def test_a_name_inside_a_longer_name_is_not_that_file() -> None:
    paths = ["notes.md"]
    assert not location.names_one("See old-notes.md.bak and mynotes.md", paths)
    assert location.names_one("See notes.md.", paths)


@pytest.mark.parametrize("records", [
    # No call reported a file: there is nothing to name, and the refusal could only invite a guess.
    _log(SUBMITTED),
    # What was reported before the user's latest message is not what this answer answers.
    _log(SUBMITTED, LISTED, SEARCHED, UserSaid(text="Thanks. Which file says where the nightly backups go?")),
])
def test_with_no_file_reported_for_this_message_an_answer_is_not_held_to_one(records) -> None:
    assert location.unnamed("Northwind Storage", SUBMITTED.goal, records) is None


def test_a_question_about_what_a_file_holds_is_not_held_to_naming_a_file() -> None:
    records = _log(SUBMITTED, LISTED, SEARCHED)
    assert location.unnamed("Northwind Storage", "Where do the nightly backups go?", records) is None


def test_once_refused_the_answer_must_open_with_a_reported_path() -> None:
    records = _log(SUBMITTED, LISTED, SEARCHED)
    assert location.answer_opens(SUBMITTED.goal, records) == ()
    refused = ProposalRejected(call_index=3, attempt=1,
                               error=location.unnamed("Northwind Storage", SUBMITTED.goal, records))
    assert location.answer_opens(SUBMITTED.goal, [*records, *_log(refused)]) == (
        "ops", "README.md", "ops/storage-notes.md",
    )


def test_a_refusal_for_an_earlier_message_narrows_no_later_answer() -> None:
    records = _log(SUBMITTED, LISTED, SEARCHED)
    refused = ProposalRejected(call_index=3, attempt=1,
                               error=location.unnamed("Northwind Storage", SUBMITTED.goal, records))
    later = _log(SUBMITTED, LISTED, SEARCHED, refused, UserSaid(text="Thanks."), SEARCHED)
    assert not location.refused(later)
    assert location.answer_opens(SUBMITTED.goal, later) == ()


def test_the_grammar_holds_an_answer_to_one_of_the_paths_with_literal_dots() -> None:
    schema = proposal.schema({}, [], citable=["result:c1"], allow_escalate=False,
                             answer_opens=["ops/storage-notes.md", "odd (1).md"])
    answer = schema["anyOf"][0]["properties"]["answer"]
    assert re.fullmatch(answer["pattern"], "ops/storage-notes.md says so.")
    assert not re.fullmatch(answer["pattern"], "Northwind Storage")
    assert not re.fullmatch(answer["pattern"], "ops/storage-notesXmd")
    # llama.cpp's converter keeps an escaped dot's backslash; the grammar must not ask for one.
    [rule] = [line for line in schema_grammar(schema).splitlines() if line.startswith("alternative-0-answer ::=")]
    assert "\\\\." not in rule and "[.]" in rule and "odd" not in rule


def test_the_decision_asks_for_the_files_path_where_the_request_asks_which_file() -> None:
    asked = context.decision_text(None, 2, "Where is it written that backups go to Harbour Backup?")
    assert asked.endswith("one full sentence that names that file's path. If not, call one tool.")
    last = context.decision_text(None, 2, "Which file says where the backups go?", attempt=context.LAST_ATTEMPT)
    assert last.endswith("Give the final answer now: the path of the file above that says it.")
    other = context.decision_text(None, 2, "Where do the nightly backups go?")
    assert other.endswith("give the final answer: one full sentence that answers it. If not, call one tool.")
    assert context.echoes_instructions("If a file above says it, give the final answer")
