"""The one notification queue: producers enqueue, a task's next request drains, the log keeps both.

Producers (the file watcher, jobs, approvals, the skill catalogue, an operator) never write into a
request; they enqueue. Immediately before a task's model call the runtime drains what is pending for
that task, in enqueue order, coalescing notifications that share a dedupe key into the latest, and
records the admission on the task's stream; the store refuses a second admission of the same
notification, so each is admitted exactly once into a request of each task it concerns.
"""

from __future__ import annotations

import secrets
from typing import Any, Sequence

from store import EventStore
from store.events import NOTIFICATIONS_STREAM, AdmittedNotification, NotificationEnqueued
from store.queries.notifications import Listed, Pending, depth, listing, pending

# The queue's reads live with its tables in the store; they are the queue's surface all the same.
__all__ = [
    "Listed", "Pending", "depth", "drain", "enqueue", "enqueue_async", "listing", "new_notification", "pending",
]


def new_notification(
    *, source: str, kind: str, tasks: Sequence[str], text: str, payload: dict[str, Any] | None = None,
    dedupe_key: str | None = None,
) -> NotificationEnqueued:
    return NotificationEnqueued(
        notification_id=f"n-{secrets.token_hex(6)}",
        source=source,
        kind=kind,
        tasks=tuple(tasks),
        payload=payload or {},
        dedupe_key=dedupe_key,
        text=text,
    )


def enqueue(store: EventStore, notification: NotificationEnqueued, *, actor: str = "agentd") -> int:
    """Put one notification on the queue; returns its seq."""
    [rec] = store.append(NOTIFICATIONS_STREAM, [notification], actor=actor)
    return rec.seq


async def enqueue_async(store: EventStore, notifications_: Sequence[NotificationEnqueued]) -> None:
    if notifications_:
        await store.append_async(NOTIFICATIONS_STREAM, list(notifications_), actor="agentd")


def drain(waiting: Sequence[Pending]) -> tuple[AdmittedNotification, ...]:
    """Pending notifications as admitted into one request: in seq order, each dedupe key once.

    Ten saves of one file before the next call are one notification: the latest, which describes the
    final state; the earlier nine are recorded as coalesced into it.
    """
    by_key: dict[str, list[Pending]] = {}
    for p in waiting:
        if p.dedupe_key is not None:
            by_key.setdefault(p.dedupe_key, []).append(p)
    admitted: list[AdmittedNotification] = []
    for p in waiting:
        group = by_key.get(p.dedupe_key) if p.dedupe_key is not None else None
        if group is not None and group[-1] is not p:
            continue
        coalesced = tuple(q.notification_id for q in group[:-1]) if group else ()
        admitted.append(AdmittedNotification(
            notification_id=p.notification_id, source=p.source, kind=p.kind, text=p.text, coalesced=coalesced,
        ))
    return tuple(admitted)
