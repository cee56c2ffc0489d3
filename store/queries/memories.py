"""Reads of the `memories` table: a decision's scope, or a listing for a person."""

from __future__ import annotations

from typing import NamedTuple

from sqlalchemy import Connection, select

from store.tables import memories


class MemoryRow(NamedTuple):
    """A memory as the projection holds it: a forgotten one has its text emptied."""

    memory_id: str
    subject: str
    tenant: str
    purpose: str
    text: str
    source: str
    recorded_seq: int
    recorded_at: str
    expires_at: str | None
    review_at: str | None
    forgotten_seq: int | None
    forgotten_at: str | None
    forgotten_reason: str | None


_COLUMNS = tuple(memories.c[name] for name in MemoryRow._fields)


def listed(conn: Connection, *, subject: str | None = None, tenant: str | None = None) -> list[MemoryRow]:
    """Memories in the order first recorded, of `subject` and `tenant` where given: the filter is the
    query's, so a decision's scope is applied before any other memory is read."""
    q = select(*_COLUMNS).order_by(memories.c.recorded_seq)
    if subject is not None:
        q = q.where(memories.c.subject == subject)
    if tenant is not None:
        q = q.where(memories.c.tenant == tenant)
    return [MemoryRow(*row) for row in conn.execute(q)]
