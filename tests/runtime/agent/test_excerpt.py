"""The lines of a file a request asks about (runtime.agent.excerpt), and where the model sees them."""

from __future__ import annotations

from runtime.agent import context
from runtime.agent.excerpt import EXCERPT_LINES, is_question, lines
from store.events import ToolCallExecuted

LOG = """2026-11-30 09:00:01 INFO started
2026-11-30 09:00:05 ERROR could not reach db.internal
2026-11-30 09:01:10 INFO retrying
2026-11-30 09:01:15 ERROR could not reach db.internal
2026-11-30 09:03:30 ERROR gave up after 3 tries
"""
ORDERS = "order_id,customer,amount\n1001,Ana,12.50\n1002,Ben,8.00\n1003,Dana,30.25\n1004,Ana,5.75\n"
NOTES = """# Meeting, 3 November 2026

Present: Ana, Ben, Chris.

## Decisions

- The Q3 report is due on 14 November.

## Action items

- Ana: update the budget sheet
- Ben: book the venue for the offsite
"""


def test_the_lines_a_request_mentions_are_picked_out_and_counted() -> None:
    found = lines("How many errors are there in logs/app.log?", "logs/app.log", LOG)
    assert found is not None
    assert (found.words, found.matched, found.total) == (("errors",), 3, 5)
    assert found.text().splitlines()[0] == 'lines that mention "errors": 3 of 5'
    assert all("ERROR" in line for line in found.lines)


def test_a_csv_row_comes_with_the_header_that_names_its_columns() -> None:
    found = lines("Who placed order 1003 in data/orders.csv?", "data/orders.csv", ORDERS)
    assert found is not None
    assert found.lines == ("order_id,customer,amount", "1003,Dana,30.25")
    assert found.matched == 1


def test_the_words_of_the_files_own_path_pick_out_nothing() -> None:
    # "orders" is every row of orders.csv; a request about the file is not about one of its lines.
    assert lines("How many orders are in data/orders.csv?", "data/orders.csv", ORDERS) is None


def test_a_csv_column_the_request_names_is_shown_as_its_values_each_once() -> None:
    found = lines("List the customers in data/orders.csv, one per line.", "data/orders.csv", ORDERS)
    assert found is not None
    assert (found.column, found.lines) == ("customer", ("Ana", "Ben", "Dana"))
    assert found.text().splitlines() == [
        'the "customer" column has 3 different values in 4 rows:', "Ana", "Ben", "Dana"
    ]


def test_a_markdown_heading_brings_its_section_and_the_best_match_wins() -> None:
    found = lines(
        "Put the action items from my 3 November meeting notes into actions.md.", "notes/meeting-2026-11-03.md", NOTES
    )
    assert found is not None
    # "November" is on two lines; the heading that says both "action" and "items" is the one asked about.
    assert found.lines == (
        "## Action items", "- Ana: update the budget sheet", "- Ben: book the venue for the offsite",
    )
    assert found.matched == 2  # the items, not the heading


def test_a_request_that_mentions_every_line_or_none_gets_no_excerpt() -> None:
    assert lines("How many times does the log say 2026?", "logs/app.log", LOG) is None
    assert lines("Summarise this file.", "logs/app.log", LOG) is None
    assert lines("What does the ERROR line say?", "short.log", "ERROR one\nINFO two") is None


def test_a_long_excerpt_is_cut_and_says_how_many_more_lines_there_are() -> None:
    text = "\n".join(f"ERROR number {i}" if i % 2 else f"INFO number {i}" for i in range(40))
    found = lines("Show the errors.", "big.log", text)
    assert found is not None and found.matched == 20
    shown = found.text().splitlines()
    assert len(shown) == 1 + EXCERPT_LINES + 1 and shown[-1] == f"(and {20 - EXCERPT_LINES} more)"


def test_a_read_result_shows_the_excerpt_after_the_content_for_the_request_it_was_read_for() -> None:
    read = ToolCallExecuted(
        call_id="c1", tool="read_file", status="ok",
        observation={"path": "logs/app.log", "content": LOG, "lines": 5},
    )
    shown = context.observation_text(read, "How many errors are there in logs/app.log?")
    assert shown.endswith("2026-11-30 09:03:30 ERROR gave up after 3 tries")
    assert shown.index("content:") < shown.index('lines that mention "errors": 3 of 5')
    # Read for another question, or for none (a recorded result shown on its own), it is the file alone.
    assert "lines that mention" not in context.observation_text(read, "What does the log say?")
    assert "lines that mention" not in context.observation_text(read)


def test_a_request_for_a_change_gets_the_file_alone() -> None:
    # What a result shows, the default model copies into what it writes: the excerpt too.
    assert is_question("How many errors are there in logs/app.log?")
    assert not is_question("Copy the errors in logs/app.log into errors.txt.")
    read = ToolCallExecuted(
        call_id="c1", tool="read_file", status="ok",
        observation={"path": "logs/app.log", "content": LOG, "lines": 5},
    )
    assert context.observation_text(read, "Copy the errors in logs/app.log into errors.txt.").endswith(
        "2026-11-30 09:03:30 ERROR gave up after 3 tries"
    )
    shown = context.observation_text(read, "Copy the errors in logs/app.log into errors.txt.")
    assert "lines that mention" not in shown
