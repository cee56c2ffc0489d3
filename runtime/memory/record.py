"""A memory as the log leaves it: the fold of its recorded and forgotten events, or the projection's row
of it (store/memory_projection.py folds by the same rules, and the tests hold the two to each other)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime

from runtime.memory.dates import utc
from store.events import MemoryForgotten, MemoryRecorded, Recorded
from store.queries.memories import MemoryRow


@dataclass(frozen=True)
class Memory:
    memory_id: str
    subject: str
    tenant: str
    purpose: str
    text: str
    source: str
    created_at: str
    expires_at: datetime | None = None
    review_at: datetime | None = None
    forgotten_at: str | None = None
    forgotten_reason: str | None = None

    @property
    def forgotten(self) -> bool:
        return self.forgotten_at is not None


def memories(records: Iterable[Recorded]) -> dict[str, Memory]:
    """Each memory by id, in the order recorded. A forgotten one stays as a tombstone, its text emptied,
    so that whatever reads the fold (a request, a listing, a replay) cannot hand the text on."""
    found: dict[str, Memory] = {}
    for rec in records:
        e = rec.event
        if isinstance(e, MemoryRecorded):
            if e.memory_id in found and found[e.memory_id].forgotten:
                continue  # nothing brings a forgotten memory back, not even its id recorded again
            found[e.memory_id] = Memory(
                memory_id=e.memory_id,
                subject=e.subject,
                tenant=e.tenant,
                purpose=e.purpose,
                text=e.text,
                source=e.source,
                created_at=rec.recorded_at,
                expires_at=_moment(e.expires_at),
                review_at=_moment(e.review_at),
            )
        elif isinstance(e, MemoryForgotten) and e.memory_id in found:
            found[e.memory_id] = replace(
                found[e.memory_id], text="", forgotten_at=rec.recorded_at, forgotten_reason=e.reason
            )
    return found


def from_rows(rows: Iterable[MemoryRow]) -> dict[str, Memory]:
    """Each memory by id, from the projection's rows, in the order recorded."""
    return {
        r.memory_id: Memory(
            memory_id=r.memory_id, subject=r.subject, tenant=r.tenant, purpose=r.purpose, text=r.text,
            source=r.source, created_at=r.recorded_at, expires_at=_moment(r.expires_at),
            review_at=_moment(r.review_at), forgotten_at=r.forgotten_at, forgotten_reason=r.forgotten_reason,
        )
        for r in rows
    }


def _moment(value: str | None) -> datetime | None:
    return None if value is None else utc(datetime.fromisoformat(value))
