"""Reads of the notification queue's tables: what waits for a task, what was sent, and to whom."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, NamedTuple

from sqlalchemy import Connection, func, select

from store.tables import notification_targets as targets, notifications, tasks


@dataclass(frozen=True)
class Pending:
    notification_id: str
    seq: int
    source: str
    kind: str
    text: str
    dedupe_key: str | None


@dataclass(frozen=True)
class Listed:
    notification_id: str
    seq: int
    enqueued_at: str
    source: str
    kind: str
    text: str
    task_id: str
    admitted_call: int | None
    coalesced_into: str | None


class Sent(NamedTuple):
    """One notification's payload, as sent to one task."""

    task_id: str
    payload: dict[str, Any]


def pending(conn: Connection, task_id: str) -> list[Pending]:
    """What waits for `task_id`, oldest first."""
    rows = conn.execute(
        select(
            notifications.c.notification_id, notifications.c.seq, notifications.c.source, notifications.c.kind,
            notifications.c.text, notifications.c.dedupe_key,
        )
        .join(targets, targets.c.notification_id == notifications.c.notification_id)
        .where(targets.c.task_id == task_id, targets.c.admitted_call.is_(None))
        .order_by(notifications.c.seq)
    )
    return [Pending(*row) for row in rows]


def listing(conn: Connection, task_id: str | None = None, limit: int | None = None) -> list[Listed]:
    """Each notification for each task it concerns, oldest first; with `limit`, the latest that many."""
    q = (
        select(
            notifications.c.notification_id, notifications.c.seq, notifications.c.enqueued_at, notifications.c.source,
            notifications.c.kind, notifications.c.text, targets.c.task_id, targets.c.admitted_call,
            targets.c.coalesced_into,
        )
        .join(targets, targets.c.notification_id == notifications.c.notification_id)
        .order_by(notifications.c.seq.desc(), targets.c.task_id)
    )
    if task_id is not None:
        q = q.where(targets.c.task_id == task_id)
    if limit is not None:
        q = q.limit(limit)
    return [Listed(*row) for row in conn.execute(q)][::-1]


def depth(conn: Connection) -> int:
    """Notifications waiting for some task's next request; those of a finished task, which makes none
    (unless a message of the user's takes it up again), do not wait."""
    return conn.execute(
        select(func.count())
        .select_from(targets.join(tasks, tasks.c.task_id == targets.c.task_id))
        .where(targets.c.admitted_call.is_(None), tasks.c.finished_at.is_(None))
    ).scalar_one()


def dedupe_keys(conn: Connection, source: str) -> set[str | None]:
    """The dedupe key of every notification `source` ever enqueued, admitted or not."""
    return set(conn.execute(select(notifications.c.dedupe_key).where(notifications.c.source == source)).scalars())


def sent(conn: Connection, source: str) -> list[Sent]:
    """Every (task, payload) pair of the notifications from `source`, in enqueue order."""
    rows = conn.execute(
        select(targets.c.task_id, notifications.c.payload)
        .join(notifications, notifications.c.notification_id == targets.c.notification_id)
        .where(notifications.c.source == source)
        .order_by(notifications.c.seq)
    )
    return [Sent(task_id, json.loads(payload)) for task_id, payload in rows]
