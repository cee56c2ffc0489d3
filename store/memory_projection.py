"""The memory projection: scoped memory's recorded and forgotten events folded into `memories`.

The rules are the fold's (runtime/memory/record.py), which the tests hold the table to: a memory
recorded again under its id replaces the row, unless the id was forgotten (nothing brings a forgotten
memory back); a tombstone empties the text and keeps when and why.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import Connection, bindparam, select

from store.events import MemoryForgotten, MemoryRecorded, Recorded
from store.sql import Statement
from store.tables import memories

MEMORY_EVENTS = (MemoryRecorded, MemoryForgotten)
MEMORY_EVENT_TYPES = tuple(cls.__name__ for cls in MEMORY_EVENTS)

# Recorded again, a memory keeps its first seq: a listing's order is the order memories first came.
_FIELDS = ("subject", "tenant", "purpose", "text", "source", "recorded_at", "expires_at", "review_at")
_forgotten = Statement(select(memories.c.forgotten_seq).where(memories.c.memory_id == bindparam("id")))
_insert = Statement(memories.insert())
_replace = Statement(
    memories.update().where(memories.c.memory_id == bindparam("b_id")).values({n: bindparam(n) for n in _FIELDS})
)
_forget = Statement(
    memories.update()
    .where(memories.c.memory_id == bindparam("b_id"))
    .values(text="", forgotten_seq=bindparam("seq"), forgotten_at=bindparam("at"), forgotten_reason=bindparam("why"))
)


def apply(conn: Connection, records: Iterable[Recorded]) -> None:
    """Fold memory events, in log order, into the table inside the caller's transaction. Memory events
    are few (a person or a checked proposal writes each), so one statement apiece costs nothing."""
    for rec in records:
        e = rec.event
        if isinstance(e, MemoryRecorded):
            row = _forgotten.execute(conn, {"id": e.memory_id}).fetchone()
            values = {
                "subject": e.subject, "tenant": e.tenant, "purpose": e.purpose, "text": e.text, "source": e.source,
                "recorded_at": rec.recorded_at, "expires_at": e.expires_at, "review_at": e.review_at,
            }
            if row is None:
                _insert.execute(conn, {"memory_id": e.memory_id, "recorded_seq": rec.seq, **values,
                                       "forgotten_seq": None, "forgotten_at": None, "forgotten_reason": None})
            elif row[0] is None:
                _replace.execute(conn, {"b_id": e.memory_id, **values})
        elif isinstance(e, MemoryForgotten):
            _forget.execute(conn, {"b_id": e.memory_id, "seq": rec.seq, "at": rec.recorded_at, "why": e.reason})
