"""A log behind its high-water mark (a -wal cut short) is refused by every command that would write to it or
seal it, in the line `db check` gives; the commands that only read go on working, and `db accept-loss`
records the loss before anything is written again."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path

import pytest

from store import EventStore
from store.events import (
    ApprovalRequested,
    ModelCalled,
    TaskPhase,
    TaskPhaseChanged,
    TaskSubmitted,
    ToolCallProposed,
)
from tests.helpers import one_error_line, serve_refused

KEPT = 6
"""Events checkpointed into the database file before the rest went to the -wal that is then lost."""


def events_in(data: Path) -> list[tuple[int, str]]:
    with sqlite3.connect(data / "agentd.db") as conn:
        rows = conn.execute("SELECT seq, hash FROM events ORDER BY seq").fetchall()
    conn.close()
    return rows


def checkpoint(db: Path) -> None:
    conn = sqlite3.connect(db)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()


def cut_copy(tmp_path: Path, *, kept: int = KEPT) -> tuple[Path, int]:
    """A copy of a data directory as kill -9 and a lost -wal leave it: the first `kept` events are in the
    database file, the rest only in a -wal that is then cut to nothing; the mark names the last. Returns the
    copy and the last seq committed."""
    live, copy = tmp_path / "live", tmp_path / "copy"
    live.mkdir(parents=True)
    with EventStore(f"sqlite:///{live / 'agentd.db'}") as store:
        checkpoint(live / "agentd.db")  # the schema, at least, is in the database file
        if kept:
            store.append("t-0", [TaskSubmitted(goal="clean the build", workspace=str(tmp_path)),
                                 TaskPhaseChanged(phase=TaskPhase.RUNNING),
                                 ToolCallProposed(call_id="c1", tool="shell", arguments={"command": "make clean"}),
                                 ApprovalRequested(approval_id="ap-1", call_id="c1", tool="shell", arguments_hash="h"),
                                 TaskPhaseChanged(phase=TaskPhase.AWAITING_APPROVAL)])
            store.append("t-1", [TaskSubmitted(goal="other", workspace=str(tmp_path))])
            assert store.last_seq() == kept
            checkpoint(live / "agentd.db")
        else:
            store.append("t-1", [TaskSubmitted(goal="other", workspace=str(tmp_path))])
        for n in range(1, 31):
            store.append("t-1", [ModelCalled(call_index=n, model="m", prompt_tokens=n, completion_tokens=1)])
        last = store.last_seq()
        assert (live / "agentd.db-wal").stat().st_size > 0, "the events were checkpointed before the copy"
        shutil.copytree(live, copy, ignore=shutil.ignore_patterns("*-shm"))
    os.truncate(copy / "agentd.db-wal", 0)
    assert len(events_in(copy)) == kept, "cutting the -wal lost nothing: the test proves nothing"
    return copy, last


def mark_of(data: Path) -> str:
    return (data / "agentd.db-mark").read_text()


# -- serve ---------------------------------------------------------------------------------------------


def test_serve_refuses_a_log_behind_its_mark_and_writes_nothing(agentd, tmp_path: Path) -> None:
    data, last = cut_copy(tmp_path)
    checked = one_error_line(agentd("--data-dir", str(data), "db", "check"), "missing")
    before, mark = events_in(data), mark_of(data)
    refused = serve_refused(data, "a log behind its mark")
    out = refused.stdout
    assert one_error_line(refused) == checked
    assert "web page" not in out
    assert events_in(data) == before and mark_of(data) == mark
    assert f"{last}" in checked


# -- every command that writes -------------------------------------------------------------------------


WRITERS = {
    "task submit": ("task", "submit", "one more"),
    "task cancel": ("task", "cancel", "t-1"),
    "task say": ("task", "say", "t-0", "go on"),
    "approvals approve": ("approvals", "approve", "ap-1"),
    "approvals deny": ("approvals", "deny", "ap-1"),
    "schedule add": ("schedule", "add", "nightly", "--cron", "0 3 * * *"),
    "notifications send": ("notifications", "send", "t-0", "the build server is back"),
}


@pytest.mark.parametrize("name", list(WRITERS))
def test_a_command_that_writes_refuses_a_log_behind_its_mark_in_the_line_db_check_gives(agentd, tmp_path, name):
    data, _ = cut_copy(tmp_path)
    checked = one_error_line(agentd("--data-dir", str(data), "db", "check"), "missing")
    before, mark = events_in(data), mark_of(data)
    assert one_error_line(agentd("--data-dir", str(data), *WRITERS[name])) == checked
    assert events_in(data) == before and mark_of(data) == mark


def test_import_into_a_log_lost_whole_is_refused(agentd, tmp_path: Path) -> None:
    """Every event was still in the -wal: the database is an empty log whose mark names 31 events."""
    source, _ = cut_copy(tmp_path / "source", kept=KEPT)
    exported = tmp_path / "kept.jsonl"
    # Only the kept part can be exported, and only once its loss has been accepted.
    assert agentd("--data-dir", str(source), "db", "accept-loss").returncode == 0
    assert agentd("--data-dir", str(source), "events", "export", "-o", str(exported)).returncode == 0
    data, _ = cut_copy(tmp_path, kept=0)
    assert events_in(data) == []
    checked = one_error_line(agentd("--data-dir", str(data), "db", "check"), "events 1 to 31 are missing")
    assert one_error_line(agentd("--data-dir", str(data), "events", "import", str(exported))) == checked
    assert events_in(data) == []


def test_export_refuses_a_log_behind_its_mark_and_leaves_no_file(agentd, tmp_path: Path) -> None:
    data, _ = cut_copy(tmp_path)
    checked = one_error_line(agentd("--data-dir", str(data), "db", "check"), "missing")
    out = tmp_path / "log.jsonl"
    assert one_error_line(agentd("--data-dir", str(data), "events", "export", "-o", str(out))) == checked
    assert not out.exists()
    to_stdout = agentd("--data-dir", str(data), "events", "export")
    assert one_error_line(to_stdout) == checked
    assert "trailer" not in to_stdout.stdout, "a sealed file went to stdout"


def test_commands_that_only_read_go_on_working_on_a_log_behind_its_mark(agentd, tmp_path: Path) -> None:
    data, _ = cut_copy(tmp_path)
    d = ("--data-dir", str(data))
    for argv in (("task", "list"), ("task", "show", "t-0"), ("events", "list"), ("approvals", "list"),
                 ("schedule", "list")):
        done = agentd(*d, *argv)
        assert done.returncode == 0, (argv, done.stderr)
    assert "ap-1" in agentd(*d, "approvals", "list").stdout
    checked = one_error_line(agentd(*d, "db", "check"), "missing")
    assert one_error_line(agentd(*d, "replay"), "missing") == checked


def test_a_log_cut_and_written_again_past_its_mark_is_refused_too(agentd, tmp_path: Path) -> None:
    """What serve did before it checked: appended over the lost seqs, past the old mark."""
    data, last = cut_copy(tmp_path)
    mark = data / "agentd.db-mark"
    kept = mark.read_bytes()
    mark.unlink()  # written as an agentd that did not hold the log to its mark wrote it
    with EventStore(f"sqlite:///{data / 'agentd.db'}") as store:
        store.append("t-2", [TaskSubmitted(goal="g", workspace="/w")])
        while store.last_seq() <= last:
            store.append("t-2", [TaskPhaseChanged(phase=TaskPhase.RUNNING)])
    mark.write_bytes(kept)
    checked = one_error_line(agentd("--data-dir", str(data), "db", "check"), f"event {last}", "not the one")
    before = events_in(data)
    assert one_error_line(agentd("--data-dir", str(data), "task", "submit", "more")) == checked
    assert events_in(data) == before


# -- the way forward -------------------------------------------------------------------------------------


def test_accept_loss_records_the_lost_events_and_lets_agentd_write_again(agentd, tmp_path: Path) -> None:
    data, last = cut_copy(tmp_path)
    d = ("--data-dir", str(data))
    checked = one_error_line(agentd(*d, "db", "check"), "missing")
    assert "agentd db accept-loss" in checked, "the line does not name the way forward"
    accepted = agentd(*d, "db", "accept-loss")
    assert accepted.returncode == 0, accepted.stderr
    assert f"events {KEPT + 1} to {last}" in accepted.stdout, accepted.stdout
    [record] = [json.loads(line) for line in (data / "agentd.db-losses").read_text().splitlines()]
    assert (record["lost_from"], record["lost_to"], record["log_ends_at"]) == (KEPT + 1, last, KEPT)
    assert record["accepted_at"] and record["by"]
    # db check says ok, and says what was lost.
    after = agentd(*d, "db", "check")
    assert after.returncode == 0, after.stderr
    assert after.stdout.startswith("ok") and f"events {KEPT + 1} to {last}" in after.stdout, after.stdout
    submitted = agentd(*d, "task", "submit", "one more")
    assert submitted.returncode == 0, submitted.stderr
    assert len(events_in(data)) == KEPT + 1
    # Nothing left to accept: refused, and the record is not written twice.
    one_error_line(agentd(*d, "db", "accept-loss"), "nothing to accept")
    assert len((data / "agentd.db-losses").read_text().splitlines()) == 1


def test_accept_loss_on_a_healthy_log_is_refused(agentd, tmp_path: Path, data_dir: Path, db_url: str) -> None:
    with EventStore(db_url) as store:
        store.append("t-1", [TaskSubmitted(goal="g", workspace="/w")])
    one_error_line(agentd("--data-dir", str(data_dir), "db", "accept-loss"), "nothing to accept")
    assert not (data_dir / "agentd.db-losses").exists()


def test_a_mark_agentd_did_not_write_is_refused_until_accepted(agentd, tmp_path: Path, data_dir, db_url) -> None:
    with EventStore(db_url) as store:
        store.append("t-1", [TaskSubmitted(goal="g", workspace="/w")])
    (data_dir / "agentd.db-mark").write_text("not a mark\n")
    d = ("--data-dir", str(data_dir))
    checked = one_error_line(agentd(*d, "db", "check"), "agentd.db-mark", "not one agentd wrote", "accept-loss")
    assert one_error_line(agentd(*d, "task", "submit", "more")) == checked
    assert agentd(*d, "db", "accept-loss").returncode == 0
    after = agentd(*d, "db", "check")
    assert after.returncode == 0 and "could not read" in after.stdout, (after.stdout, after.stderr)
    assert agentd(*d, "task", "submit", "more").returncode == 0
    assert mark_of(data_dir).startswith(f"{2:020d} ")


def test_a_mark_created_but_never_written_marks_nothing(agentd, data_dir, db_url) -> None:
    """A process killed between creating the mark and its first write leaves an empty file, not a loss."""
    with EventStore(db_url) as store:
        store.append("t-1", [TaskSubmitted(goal="g", workspace="/w")])
    (data_dir / "agentd.db-mark").write_bytes(b"")
    assert agentd("--data-dir", str(data_dir), "db", "check").stdout.strip() == "ok"
    assert agentd("--data-dir", str(data_dir), "task", "submit", "more").returncode == 0
    assert mark_of(data_dir).startswith(f"{2:020d} ")
