"""Auditing the database as evidence: SQLite's own integrity check, the chain of hashes over the log,
the projections' high-water marks against the log, and the log against the mark kept outside it.

Each check names the first seq where the log stops being the one that was committed, in one line.
"""

from __future__ import annotations

from sqlalchemy import Connection, func, select

from store import positions
from store.chain import GENESIS, link
from store.database import describe
from store.errors import DatabaseCorrupt, LogDamaged
from store.log import RawEvent, iter_raw
from store.mark import Position
from store.tables import events, notifications, schedules, tasks


def check_integrity(conn: Connection, *, quick: bool = False) -> None:
    """SQLite's integrity check over every page of the database (other backends check their own).

    `quick` runs quick_check first, which skips matching each index against its table (about half the
    time); only if it finds something is the full check run, so that the line is the one db check gives.
    """
    if conn.dialect.name != "sqlite":
        return
    found = _problems(conn, "quick_check") if quick else None
    if found == []:
        return
    problems = _problems(conn, "integrity_check") or found
    if problems:
        # SQLite heads its report with "*** in database main ***" and puts several problems in one row.
        count = "1 problem" if len(problems) == 1 else f"{len(problems)} problems"
        raise DatabaseCorrupt(
            f"{describe(str(conn.engine.url))} is corrupt: SQLite's integrity check found {count}, the first: "
            f"{problems[0]}; restore it from a backup"
        )


def _problems(conn: Connection, pragma: str) -> list[str]:
    rows = [r[0] for r in conn.exec_driver_sql(f"PRAGMA {pragma}")]
    if rows == ["ok"]:
        return []
    lines = (line.strip() for row in rows for line in str(row).splitlines())
    return [line for line in lines if line and not (line.startswith("*** ") and line.endswith(" ***"))]


def check_log(conn: Connection, committed: Position | None) -> None:
    """Raise LogDamaged naming the first seq where the log is not the one that was committed;
    `committed` is what the high-water mark held before `conn`'s snapshot began (store.mark.committed)."""
    for problem in (_chain_problem, _projection_problem, mark_problem):
        found = problem(conn, committed)
        if found is not None:
            raise LogDamaged(found)


def _chain_problem(conn: Connection, committed: Position | None) -> str | None:
    expected_seq, prev = 1, GENESIS
    for raw in iter_raw(conn):
        found = chain_break(raw, expected_seq, prev)
        if found is not None:
            return found
        expected_seq, prev = expected_seq + 1, raw.hash
    return None


def chain_break(raw: RawEvent, seq: int, prev: str) -> str | None:
    """What is wrong with `raw` as the log's event `seq` following the hash `prev`; None if it links."""
    if raw.seq != seq:
        return f"events {seq} to {raw.seq - 1} are missing: the log jumps from seq {seq - 1} to {raw.seq}"
    if raw.hash is None:
        return f"event {raw.seq} has no chain hash: it was written behind agentd's back"
    if raw.hash != link(prev, raw[:-1]):
        return (
            f"event {raw.seq}'s hash does not match its content and the event before: the log was changed "
            "after it was written"
        )
    return None


def _projection_problem(conn: Connection, committed: Position | None) -> str | None:
    """The projections are written in the transaction of the events they fold, so every seq they record
    is in the log: a task row names the event it last folded, which must be that task's at that version."""
    last = positions.last_seq(conn)
    recorded = max(
        conn.execute(select(func.coalesce(func.max(c), 0))).scalar_one()
        for c in (tasks.c.last_seq, notifications.c.seq, schedules.c.added_seq, schedules.c.removed_seq)
    )
    if recorded > last:
        return (
            f"events {last + 1} to {recorded} are missing: the log ends at seq {last}, but the projections "
            f"recorded event {recorded}"
        )
    folded = events.alias("folded")
    row = conn.execute(
        select(tasks.c.task_id, tasks.c.version, tasks.c.last_seq, folded.c.stream_id, folded.c.stream_version)
        .select_from(tasks.outerjoin(folded, folded.c.seq == tasks.c.last_seq))
        .where(
            folded.c.seq.is_(None)
            | (folded.c.stream_id != tasks.c.task_id)
            | (folded.c.stream_version != tasks.c.version)
        )
        .order_by(tasks.c.last_seq)
        .limit(1)
    ).first()
    if row is None:
        return None
    found = "no such event" if row.stream_id is None else f"{row.stream_id} version {row.stream_version}"
    return (
        f"event {row.last_seq} is not the one the projections folded: task {row.task_id} records it as its "
        f"version {row.version}, the log has {found}"
    )


def check_mark(conn: Connection, committed: Position | None) -> None:
    """Raise LogDamaged, in db check's line, if the log is behind the mark: what every write and every
    export must refuse, since either would pass the loss on as a log that checks."""
    found = mark_problem(conn, committed)
    if found is not None:
        raise LogDamaged(found)


def mark_problem(conn: Connection, committed: Position | None) -> str | None:
    if committed is None:
        return None
    last, name = positions.last_seq(conn), committed.path.name
    way_forward = (
        "restore the database with its -wal from a backup, or run `agentd db accept-loss` to go on without them"
    )
    if committed.seq > last:
        return (
            f"events {last + 1} to {committed.seq} are missing: the log ends at seq {last}, but seq {committed.seq} "
            f"was committed ({name} says so): a -wal cut short, or an older copy of the database; {way_forward}"
        )
    if positions.hash_at(conn, committed.seq) != committed.hash:
        return (
            f"event {committed.seq} is not the one committed at that seq ({name} holds another hash): "
            f"the log was cut short and written again; {way_forward}"
        )
    return None
