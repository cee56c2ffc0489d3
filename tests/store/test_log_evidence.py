"""The log as evidence: a chain of hashes that `db check` verifies, a high-water mark outside the WAL that
tells a cut -wal from a healthy log, exports that cannot be cut short silently, and a fold that refuses
what the live path would never write, in an append, an import and a replay alike."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path

import pytest

from store import EventStore, StoreError
from store.events import (
    ApprovalGranted,
    ApprovalRequested,
    Event,
    ModelCalled,
    TaskPhase,
    TaskPhaseChanged,
    TaskSubmitted,
    ToolCallExecuted,
    ToolCallProposed,
    ToolCallStarted,
)
from tests.helpers import one_error_line


def fill(store: EventStore, tasks: int = 4, steps: int = 16) -> int:
    """`tasks` tasks of `steps` model calls each, one commit per event; returns the log's last seq."""
    for t in range(tasks):
        store.append(f"t-{t}", [TaskSubmitted(goal=f"goal {t}", workspace="/w")])
    for n in range(1, steps + 1):
        for t in range(tasks):
            store.append(f"t-{t}", [ModelCalled(call_index=n, model="m", prompt_tokens=n, completion_tokens=1)])
    return store.last_seq()


def shell_call(call_id: str = "c1") -> ToolCallProposed:
    return ToolCallProposed(call_id=call_id, tool="shell", arguments={"command": "rm -rf build"})


def started(call_id: str = "c1", idempotent: bool = False) -> ToolCallStarted:
    return ToolCallStarted(call_id=call_id, tool="shell", idempotent=idempotent, effects=("external",))


def executed(call_id: str = "c1") -> ToolCallExecuted:
    return ToolCallExecuted(call_id=call_id, tool="shell", status="ok", observation={"exit_code": 0})


def submitted_and_running(store: EventStore, task_id: str = "t-1") -> None:
    store.append(task_id, [TaskSubmitted(goal="clean the build", workspace="/w"),
                           TaskPhaseChanged(phase=TaskPhase.RUNNING)])


def append_behind_the_stores_back(store: EventStore, stream_id: str, events: list[Event]) -> None:
    """Rows written straight into the log, chained as agentd chains them, with no projection and no rule:
    what an import file or a copied database may hold that no append would have written."""
    from store import chain, log, positions

    def write(conn) -> None:
        seq, prev = positions.head(conn)
        version = positions.stream_version(conn, stream_id)
        rows = []
        for i, e in enumerate(events, start=1):
            row = (seq + i, stream_id, version + i, type(e).__name__, type(e).schema_version, e.model_dump_json(),
                   "2026-12-01T00:00:00.000000Z", "mallory", None, None)
            prev = chain.link(prev, row)
            rows.append((*row, prev))
        log.INSERT.insert(conn, rows)

    store.in_write_transaction(write)


# -- the chain, and what db check makes of it ---------------------------------------------------------


def test_a_copy_whose_wal_was_cut_in_half_fails_db_check_naming_the_missing_events(agentd, tmp_path: Path) -> None:
    live = tmp_path / "live"
    live.mkdir()
    copy = tmp_path / "copy"
    with EventStore(f"sqlite:///{live / 'agentd.db'}") as store:
        last = fill(store)
        assert last == 68
        wal = live / "agentd.db-wal"
        assert wal.stat().st_size > 0, "the events were checkpointed before the copy"
        # A copy of the data directory as a kill -9 leaves it: the WAL not checkpointed, no -shm.
        shutil.copytree(live, copy, ignore=shutil.ignore_patterns("*-shm"))
    os.truncate(copy / "agentd.db-wal", (copy / "agentd.db-wal").stat().st_size // 2)

    line = one_error_line(agentd("--data-dir", str(copy), "db", "check"), "missing", "68")
    assert "ends at seq" in line, line
    with sqlite3.connect(copy / "agentd.db") as conn:
        remaining = conn.execute("SELECT max(seq) FROM events").fetchone()[0]
    conn.close()
    assert remaining < 68, "cutting the WAL lost nothing: the test proves nothing"
    assert f"ends at seq {remaining}" in line and f"{remaining + 1}" in line, line
    # Replay folds the shorter log consistently, and still must not call it healthy.
    one_error_line(agentd("--data-dir", str(copy), "replay"), "missing")
    # The original is whole.
    assert agentd("--data-dir", str(live), "db", "check").stdout.strip() == "ok"


def test_db_check_names_the_first_event_whose_row_was_changed_after_it_was_written(agentd, data_dir, db_url) -> None:
    with EventStore(db_url) as store:
        fill(store, tasks=2, steps=3)
    assert agentd("--data-dir", str(data_dir), "db", "check").stdout.strip() == "ok"
    with sqlite3.connect(data_dir / "agentd.db") as conn:
        conn.execute("DROP TRIGGER events_no_update")
        conn.execute("UPDATE events SET actor = 'mallory' WHERE seq IN (3, 5)")
    conn.close()
    one_error_line(agentd("--data-dir", str(data_dir), "db", "check"), "event 3", "hash")


def test_db_check_reports_projections_that_recorded_events_the_log_no_longer_has(agentd, data_dir, db_url) -> None:
    with EventStore(db_url) as store:
        last = fill(store, tasks=2, steps=3)
    with sqlite3.connect(data_dir / "agentd.db") as conn:
        conn.execute("UPDATE tasks SET last_seq = ?, version = 9 WHERE task_id = 't-1'", (last + 30,))
    conn.close()
    one_error_line(agentd("--data-dir", str(data_dir), "db", "check"), f"event {last + 30}", f"ends at seq {last}")


def test_db_check_reports_an_event_that_differs_from_the_one_committed_at_its_seq(agentd, tmp_path: Path) -> None:
    """The log cut short, then written again past the cut: the mark still names what was committed."""
    live = tmp_path / "live"
    live.mkdir()
    with EventStore(f"sqlite:///{live / 'agentd.db'}") as store:
        fill(store, tasks=2, steps=3)
        shutil.copytree(live, tmp_path / "old", ignore=shutil.ignore_patterns("*-shm"))
        store.append("t-0", [TaskPhaseChanged(phase=TaskPhase.RUNNING)])
        store.append("t-1", [TaskPhaseChanged(phase=TaskPhase.RUNNING)])
    # The older copy of the database, beside the newer mark; then one event written where another was.
    for name in ("agentd.db", "agentd.db-wal"):
        shutil.copy(tmp_path / "old" / name, live / name)
    (live / "agentd.db-shm").unlink(missing_ok=True)
    # Written as an agentd that did not hold the log to its mark wrote it (today's refuses: test_mark_guard.py).
    mark = (live / "agentd.db-mark").read_bytes()
    (live / "agentd.db-mark").unlink()
    with EventStore(f"sqlite:///{live / 'agentd.db'}") as store:
        store.append("t-1", [TaskPhaseChanged(phase=TaskPhase.CANCELLED)])
        store.append("t-1", [TaskPhaseChanged(phase=TaskPhase.RUNNING)])
    (live / "agentd.db-mark").write_bytes(mark)
    one_error_line(agentd("--data-dir", str(live), "db", "check"), "event 10", "not the one")


def test_every_append_is_chained_and_a_fresh_store_checks_ok(agentd, data_dir, db_url) -> None:
    with EventStore(db_url) as store:
        fill(store, tasks=2, steps=2)
    with sqlite3.connect(data_dir / "agentd.db") as conn:
        hashes = [r[0] for r in conn.execute("SELECT hash FROM events ORDER BY seq")]
    conn.close()
    assert len(hashes) == 6 and len(set(hashes)) == 6 and all(len(h) == 64 for h in hashes)
    assert agentd("--data-dir", str(data_dir), "db", "check").stdout.strip() == "ok"


def test_the_chain_is_sha256_of_the_previous_hash_the_row_and_its_payload() -> None:
    """The chain's definition is part of the export format: pinned, so that a change to it is deliberate."""
    import hashlib

    from store.chain import GENESIS, link

    row = (1, "t-1", 1, "TaskSubmitted", 1, '{"goal":"g"}', "2026-12-01T00:00:00.000000Z", "ann", None, None)
    head = '[1,"t-1",1,"TaskSubmitted",1,"2026-12-01T00:00:00.000000Z","ann",null,null]'
    expected = hashlib.sha256(f"{GENESIS}\n{head}\n" '{"goal":"g"}'.encode()).hexdigest()
    assert GENESIS == "0" * 64
    assert link(GENESIS, row) == expected


# -- a database from before the chain --------------------------------------------------------------


def test_upgrading_a_database_from_before_the_chain_hashes_its_log_and_keeps_open_calls_open(
    agentd, data_dir, db_url
) -> None:
    from alembic import command
    from sqlalchemy import create_engine

    from store.migrate import alembic_config

    engine = create_engine(db_url)
    with engine.begin() as conn:
        command.upgrade(alembic_config(conn), "0003")
        payloads = [
            ("TaskSubmitted", TaskSubmitted(goal="g", workspace="/w")),
            ("ToolCallProposed", shell_call()),
            ("ApprovalRequested", ApprovalRequested(approval_id="ap-1", call_id="c1", tool="shell",
                                                    arguments_hash="a" * 64)),
        ]
        for seq, (name, e) in enumerate(payloads, start=1):
            conn.exec_driver_sql(
                "INSERT INTO events VALUES (?, 't-1', ?, ?, 1, ?, '2026-11-30T00:00:00.000000Z', 'ann', NULL, NULL)",
                (seq, seq, name, e.model_dump_json()),
            )
        conn.exec_driver_sql(
            "INSERT INTO tasks VALUES ('t-1', 'g', '/w', 'default', 'submitted', 40, 200000, 0, 0, NULL, "
            "'2026-11-30T00:00:00.000000Z', '2026-11-30T00:00:00.000000Z', NULL, 3, 3)"
        )
        conn.exec_driver_sql(
            "INSERT INTO approvals VALUES ('ap-1', 't-1', 'c1', 'shell', ?, 'pending', '', NULL, 3, NULL, NULL, NULL)",
            ("a" * 64,),
        )
    engine.dispose()
    with EventStore(db_url) as store:
        # The call proposed before the upgrade is still one the fold knows: it may start and finish.
        store.append("t-1", [ApprovalGranted(approval_id="ap-1", by="ann"), started(), executed()])
        with pytest.raises(StoreError, match="event 7 .*second result"):
            store.append("t-1", [executed()])
    assert agentd("--data-dir", str(data_dir), "db", "check").stdout.strip() == "ok"
    replay = agentd("--data-dir", str(data_dir), "replay")
    assert replay.returncode == 0, replay.stderr


# -- exports ---------------------------------------------------------------------------------------------


def exported(agentd, tmp_path: Path, store_dir: Path) -> Path:
    out = tmp_path / "log.jsonl"
    done = agentd("--data-dir", str(store_dir), "events", "export", "-o", str(out))
    assert done.returncode == 0, done.stderr
    return out


def test_an_export_ends_with_a_trailer_of_its_count_last_seq_and_last_hash(agentd, tmp_path, data_dir, db_url) -> None:
    with EventStore(db_url) as store:
        last = fill(store, tasks=2, steps=2)
    lines = exported(agentd, tmp_path, data_dir).read_text(encoding="utf-8").splitlines()
    events = [json.loads(line) for line in lines[:-1]]
    trailer = json.loads(lines[-1])
    assert trailer == {"trailer": {"count": last, "last_seq": last, "last_hash": events[-1]["hash"]}}
    assert [e["seq"] for e in events] == list(range(1, last + 1))


def export_lines(agentd, tmp_path: Path, data_dir: Path, db_url: str) -> list[str]:
    """The lines of an export of two tasks of four steps each, ends kept."""
    with EventStore(db_url) as store:
        fill(store, tasks=2, steps=4)
    return exported(agentd, tmp_path, data_dir).read_text(encoding="utf-8").splitlines(keepends=True)


def refused(agentd, tmp_path: Path, lines: list[str], *needles: str) -> None:
    """`lines` as a file is refused by verify and by import in one line each, and nothing is imported."""
    path = tmp_path / "damaged.jsonl"
    path.write_text("".join(lines), encoding="utf-8")
    target = ("--data-dir", str(tmp_path / "target"))
    for command in ("verify", "import"):
        one_error_line(agentd(*target, "events", command, str(path)), *needles)
    assert agentd(*target, "events", "list").stdout.strip() == "(none)", "a refused import left events behind"


def test_an_export_cut_at_a_line_boundary_is_refused_and_nothing_is_imported(agentd, tmp_path, data_dir, db_url):
    lines = export_lines(agentd, tmp_path, data_dir, db_url)
    refused(agentd, tmp_path, lines[: len(lines) // 2], "trailer", "cut short")


def test_an_export_whose_line_was_edited_is_refused_naming_the_line(agentd, tmp_path, data_dir, db_url) -> None:
    lines = export_lines(agentd, tmp_path, data_dir, db_url)
    lines[4] = lines[4].replace('"prompt_tokens":', '"prompt_tokens":1')
    refused(agentd, tmp_path, lines, "line 5", "hash")


def test_a_trailer_that_does_not_match_the_lines_is_refused(agentd, tmp_path, data_dir, db_url) -> None:
    lines = export_lines(agentd, tmp_path, data_dir, db_url)
    # The last event dropped and the trailer kept: the count and the hash no longer match.
    refused(agentd, tmp_path, lines[:-2] + lines[-1:], "trailer says 10 events", "the lines hold 9")


def test_a_line_after_the_trailer_is_refused(agentd, tmp_path, data_dir, db_url) -> None:
    lines = export_lines(agentd, tmp_path, data_dir, db_url)
    refused(agentd, tmp_path, lines + lines[:1], f"line {len(lines) + 1}", "after the trailer")


def test_events_verify_checks_a_whole_export_without_importing_it(agentd, tmp_path, data_dir, db_url) -> None:
    with EventStore(db_url) as store:
        last = fill(store, tasks=2, steps=2)
    source = exported(agentd, tmp_path, data_dir)
    target = tmp_path / "target"
    verified = agentd("--data-dir", str(target), "events", "verify", str(source))
    assert verified.returncode == 0, verified.stderr
    assert verified.stdout.startswith(f"ok: {last} events"), verified.stdout
    assert not (target / "agentd.db").exists(), "verify opened (and so created) a store"
    imported = agentd("--data-dir", str(target), "events", "import", str(source))
    assert imported.returncode == 0 and f"imported {last} events" in imported.stdout, imported.stderr
    assert agentd("--data-dir", str(target), "db", "check").stdout.strip() == "ok"


# -- the fold refuses what the live path never writes ---------------------------------------------------


def test_the_store_refuses_a_second_result_for_a_call(db_url) -> None:
    with EventStore(db_url) as store:
        submitted_and_running(store)
        store.append("t-1", [shell_call(), started(), executed()])
        with pytest.raises(StoreError, match="event 6 .*second result for call c1"):
            store.append("t-1", [executed()])
        assert store.last_seq() == 5


def test_the_store_refuses_a_second_start_of_a_call_nobody_approved_running_again(db_url) -> None:
    with EventStore(db_url) as store:
        submitted_and_running(store)
        store.append("t-1", [shell_call(), started()])
        with pytest.raises(StoreError, match="event 5 .*starts call c1 of t-1 again"):
            store.append("t-1", [started()])


def test_the_store_refuses_a_start_or_a_result_for_a_call_never_proposed(db_url) -> None:
    with EventStore(db_url) as store:
        submitted_and_running(store)
        with pytest.raises(StoreError, match="event 3 .*call c9 of t-1, which was never proposed"):
            store.append("t-1", [executed("c9")])
        with pytest.raises(StoreError, match="event 3 .*call c9 of t-1, which was never proposed"):
            store.append("t-1", [started("c9")])
        assert store.last_seq() == 2


def test_the_store_accepts_what_the_live_path_writes_after_a_crash(db_url) -> None:
    """An idempotent call simply starts again; any other starts again only once a person approved it."""
    with EventStore(db_url) as store:
        submitted_and_running(store)
        store.append("t-1", [ToolCallProposed(call_id="c1", tool="read_file", arguments={"path": "a"}),
                             ToolCallStarted(call_id="c1", tool="read_file", idempotent=True)])
        store.append("t-1", [ToolCallStarted(call_id="c1", tool="read_file", idempotent=True),
                             ToolCallExecuted(call_id="c1", tool="read_file", status="ok")])
        store.append("t-1", [shell_call("c2"), started("c2")])
        store.append("t-1", [ApprovalRequested(approval_id="ap-1", call_id="c2", tool="shell", arguments_hash="a" * 64),
                             TaskPhaseChanged(phase=TaskPhase.AWAITING_APPROVAL)])
        store.append("t-1", [ApprovalGranted(approval_id="ap-1", by="ann"), TaskPhaseChanged(phase=TaskPhase.RUNNING)])
        store.append("t-1", [started("c2"), executed("c2")])
        # A denied call has a result without ever starting.
        store.append("t-1", [shell_call("c3"), ToolCallExecuted(call_id="c3", tool="shell", status="denied")])
        actions = [(a.call_id, a.status) for a in store.task("t-1").actions]
        assert actions == [("c1", "ok"), ("c2", "ok"), ("c3", "denied")]


def test_the_store_refuses_a_result_naming_another_tool_than_the_proposal(db_url) -> None:
    with EventStore(db_url) as store:
        submitted_and_running(store)
        store.append("t-1", [shell_call()])
        with pytest.raises(StoreError, match="event 4 .*'read_file' for call c1 of t-1.*'shell'"):
            store.append("t-1", [ToolCallExecuted(call_id="c1", tool="read_file", status="ok")])


CASES = {
    "duplicated-result": ([shell_call(), started(), executed(), executed()], "event 6", "second result"),
    "duplicated-start": ([shell_call(), started(), started(), executed()], "event 5", "again"),
    "result-never-proposed": ([executed("c7")], "event 3", "never proposed"),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_replay_import_and_verify_refuse_what_the_live_path_never_writes(agentd, tmp_path, data_dir, db_url, case):
    events, *needles = CASES[case]
    with EventStore(db_url) as store:
        submitted_and_running(store)
        append_behind_the_stores_back(store, "t-1", events)
    one_error_line(agentd("--data-dir", str(data_dir), "replay"), *needles)
    source = exported(agentd, tmp_path, data_dir)
    refused(agentd, tmp_path, source.read_text(encoding="utf-8").splitlines(keepends=True), *needles)


# -- listing -------------------------------------------------------------------------------------------


def test_listing_an_unknown_event_type_is_a_usage_error_naming_the_valid_ones(agentd, data_dir, db_url) -> None:
    with EventStore(db_url) as store:
        fill(store, tasks=1, steps=1)
    line = one_error_line(agentd("--data-dir", str(data_dir), "events", "list", "--type", "Nope"), "'Nope'",
                          "TaskSubmitted", "ToolCallExecuted", code=2)
    assert "ModelCalled" in line
    listed = agentd("--data-dir", str(data_dir), "events", "list", "--type", "ModelCalled")
    assert listed.returncode == 0 and "ModelCalled" in listed.stdout
