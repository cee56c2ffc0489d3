"""Writing memory is a proposal that code checks: a known source, a whole scope, an expiry or review date
for what a model inferred, and the text redacted before anything is recorded. Then forgetting.

Each command decides with a pure function (`recorded`, `forgotten`) and appends what it returns.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime

from runtime.errors import InvalidCommand, NotFound
from runtime.memory.dates import iso, utc
from runtime.memory.load import INFERRED
from runtime.memory.record import Memory, from_rows
from runtime.memory.redact import Pattern, redact
from runtime.memory.retention import default_expiry
from store.events import MEMORY_SOURCES, MEMORY_STREAM, MemoryForgotten, MemoryRecorded


def new_memory_id() -> str:
    return "m-" + secrets.token_hex(5)


def recorded(
    *,
    subject: str,
    tenant: str,
    purpose: str,
    text: str,
    source: str,
    expires_at: datetime | None,
    review_at: datetime | None,
    now: datetime,
    retention: Mapping[str, int] | None = None,
    patterns: Iterable[str | re.Pattern[str] | Pattern] = (),
    memory_id: str | None = None,
) -> tuple[MemoryRecorded, tuple[str, ...]]:
    """The event a proposed memory is recorded as, and the kinds of data redacted from its text; or the
    one-line InvalidCommand that says why it is refused."""
    for name, value in (("subject", subject), ("tenant", tenant), ("purpose", purpose), ("text", text)):
        if not value.strip():
            raise InvalidCommand(f"a memory needs a {name}; the one given is {'blank' if value else 'empty'}")
    subject, tenant, purpose = subject.strip(), tenant.strip(), purpose.strip()
    if source not in MEMORY_SOURCES:
        raise InvalidCommand(f"source {source!r} is not one of {', '.join(MEMORY_SOURCES)}")
    now = utc(now)
    for name, moment in (("expiry", expires_at), ("review date", review_at)):
        if moment is not None and utc(moment) <= now:
            raise InvalidCommand(f"the {name} {utc(moment).isoformat()} has passed already")
    if expires_at is None and review_at is None:
        expires_at = default_expiry(purpose, now, retention or {})
    if source == INFERRED and expires_at is None and review_at is None:
        # A model's statement never turns silently into a permanent fact about someone.
        raise InvalidCommand(
            f"a {INFERRED} memory needs an expiry or a review date (none given, and no retention for "
            f"purpose {purpose!r})"
        )
    clean = redact(text, patterns)
    event = MemoryRecorded(
        memory_id=memory_id or new_memory_id(),
        subject=subject,
        tenant=tenant,
        purpose=purpose,
        text=clean.text,
        source=source,
        expires_at=iso(expires_at),
        review_at=iso(review_at),
    )
    return event, clean.kinds


def forgotten(known: Mapping[str, Memory], memory_id: str, reason: str) -> MemoryForgotten:
    """The tombstone for `memory_id`, or the one-line error that says it is not there to forget."""
    m = known.get(memory_id)
    if m is None:
        raise NotFound(f"no memory {memory_id!r} (agentd memory list shows each one's id)")
    if m.forgotten:
        raise InvalidCommand(f"memory {memory_id} was forgotten already, at {m.forgotten_at[:19]} UTC")
    return MemoryForgotten(memory_id=memory_id, reason=redact(reason).text)


def propose(
    store,
    *,
    subject: str,
    tenant: str,
    purpose: str,
    text: str,
    source: str,
    expires_at: datetime | None = None,
    review_at: datetime | None = None,
    by: str,
    retention: Mapping[str, int] | None = None,
    patterns: Iterable[str | re.Pattern[str] | Pattern] = (),
    now: datetime | None = None,
) -> tuple[str, tuple[str, ...]]:
    """Check, redact and record a memory; its id and the kinds of data redacted from its text."""
    event, kinds = recorded(
        subject=subject, tenant=tenant, purpose=purpose, text=text, source=source, expires_at=expires_at,
        review_at=review_at, now=now or datetime.now(UTC), retention=retention, patterns=patterns,
    )
    store.append(MEMORY_STREAM, [event], actor=by)
    return event.memory_id, kinds


def forget(store, memory_id: str, reason: str = "", *, by: str) -> None:
    """Record the tombstone that keeps `memory_id`'s text from loading anywhere again."""
    store.append(MEMORY_STREAM, [forgotten(from_rows(store.memories()), memory_id, reason)], actor=by)
