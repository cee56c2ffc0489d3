"""Where the event log stands: its last seq, a stream's version, its length. No event is decoded."""

from __future__ import annotations

from sqlalchemy import Connection, bindparam, func, select

from store.sql import Statement
from store.tables import events

_last_seq = Statement(select(func.coalesce(func.max(events.c.seq), 0)))
_stream_version = Statement(
    select(func.coalesce(func.max(events.c.stream_version), 0)).where(events.c.stream_id == bindparam("stream_id"))
)


def last_seq(conn: Connection) -> int:
    return _last_seq.scalar(conn)


def stream_version(conn: Connection, stream_id: str) -> int:
    return _stream_version.scalar(conn, {"stream_id": stream_id})


def count(conn: Connection) -> int:
    return conn.execute(select(func.count()).select_from(events)).scalar_one()
