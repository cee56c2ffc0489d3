"""Reading the event log: raw rows as stored, and decoded records in log order."""

from __future__ import annotations

from typing import Iterator, NamedTuple, Sequence

from sqlalchemy import Connection, select

from store.events import Recorded, decode

# Where the log stands, kept apart so that a command that only asks it need not load the event classes.
from store.positions import count, last_seq, stream_version  # noqa: F401  (re-exported for the log's readers)
from store.sql import RowInsert, Statement
from store.tables import events

COLUMNS = tuple(c.name for c in events.columns)
CHUNK = 5000

INSERT = RowInsert(events)


class RawEvent(NamedTuple):
    """A row of the `events` table exactly as stored; decoding is a separate, failable step."""

    seq: int
    stream_id: str
    stream_version: int
    type: str
    schema_version: int
    payload: str
    recorded_at: str
    actor: str
    causation_id: str | None
    correlation_id: str | None
    hash: str | None

    def decode(self) -> Recorded:
        return Recorded(
            self.seq,
            self.stream_id,
            self.stream_version,
            self.recorded_at,
            self.actor,
            self.causation_id,
            self.correlation_id,
            decode(self.type, self.schema_version, self.payload, self.seq),
        )


assert RawEvent._fields == COLUMNS, "RawEvent must mirror the events table"


def _select(
    conn: Connection,
    *,
    after: int = 0,
    until: int | None = None,
    stream_id: str | Sequence[str] | None = None,
    types: Sequence[str] = (),
    limit: int | None = None,
    descending: bool = False,
):
    """A driver cursor over the events rows the arguments pick, in seq order (or reverse)."""
    q = select(*events.columns)
    if after:
        q = q.where(events.c.seq > after)
    if until is not None:
        q = q.where(events.c.seq <= until)
    if isinstance(stream_id, str):
        q = q.where(events.c.stream_id == stream_id)
    elif stream_id is not None:
        q = q.where(events.c.stream_id.in_(list(stream_id)))
    if types:
        q = q.where(events.c.type.in_(list(types)))
    q = q.order_by(events.c.seq.desc() if descending else events.c.seq)
    if limit is not None:
        q = q.limit(limit)
    # Straight from the driver's cursor: replay reads every row, and SQLAlchemy's result
    # machinery costs more per row than SQLite does.
    return Statement(q).execute(conn)


def has_type(conn: Connection, type_name: str) -> bool:
    """Whether any event of the log has this type (a type this agentd may not know)."""
    return conn.execute(select(events.c.seq).where(events.c.type == type_name).limit(1)).first() is not None


def iter_raw(conn: Connection, **kw) -> Iterator[RawEvent]:
    """Events as stored (see `_select` for the filters), fetched in chunks so a large log never sits in memory."""
    cursor = _select(conn, **kw)
    make = RawEvent._make
    while rows := cursor.fetchmany(CHUNK):
        yield from map(make, rows)


def iter_record_chunks(conn: Connection, **kw) -> Iterator[list[Recorded]]:
    """Decoded events in lists of up to CHUNK, as fetched.

    Replay's path: each row goes from the driver's tuple straight to its Recorded, with no named tuple
    or generator step per row in between (a few percent of reading and decoding an event).
    """
    cursor = _select(conn, **kw)
    while rows := cursor.fetchmany(CHUNK):
        yield [
            Recorded(seq, stream_id, version, recorded_at, actor, causation, correlation,
                     decode(type_name, schema_version, payload, seq))
            for seq, stream_id, version, type_name, schema_version, payload, recorded_at, actor, causation,
            correlation, _hash in rows
        ]


def iter_records(conn: Connection, **kw) -> Iterator[Recorded]:
    for chunk in iter_record_chunks(conn, **kw):
        yield from chunk

