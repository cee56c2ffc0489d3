"""Where the event log stands: its last seq and hash, a stream's version, its length. No event is decoded."""

from __future__ import annotations

from sqlalchemy import Connection, bindparam, func, select

from store.chain import GENESIS
from store.sql import Statement
from store.tables import events

_last_seq = Statement(select(func.coalesce(func.max(events.c.seq), 0)))
_head = Statement(select(events.c.seq, events.c.hash).order_by(events.c.seq.desc()).limit(1))
_hash_at = Statement(select(events.c.hash).where(events.c.seq == bindparam("seq")))
_stream_version = Statement(
    select(func.coalesce(func.max(events.c.stream_version), 0)).where(events.c.stream_id == bindparam("stream_id"))
)


def last_seq(conn: Connection) -> int:
    return _last_seq.scalar(conn)


def head(conn: Connection) -> tuple[int, str | None]:
    """The last seq and its hash; (0, GENESIS) for an empty log. The hash is None for a row written
    behind the writer's back."""
    row = _head.execute(conn).fetchone()
    return (0, GENESIS) if row is None else (row[0], row[1])


def hash_at(conn: Connection, seq: int) -> str | None:
    """The hash of event `seq`; None if there is no such event (or it has no hash)."""
    return _hash_at.scalar(conn, {"seq": seq})


def stream_version(conn: Connection, stream_id: str) -> int:
    return _stream_version.scalar(conn, {"stream_id": stream_id})


def count(conn: Connection) -> int:
    return conn.execute(select(func.count()).select_from(events)).scalar_one()
