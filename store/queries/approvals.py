"""Reads of the `approvals` table for the page: how many wait, and the latest decisions."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection, func, select

from store.tables import approvals, events


@dataclass(frozen=True)
class Decided:
    approval_id: str
    task_id: str
    tool: str
    status: str
    by: str
    reason: str
    at: str


def count_pending(conn: Connection) -> int:
    return conn.execute(select(func.count()).select_from(approvals).where(approvals.c.status == "pending")).scalar_one()


def recently_decided(conn: Connection, limit: int) -> list[Decided]:
    """The latest `limit` decisions, newest first, each with when it was recorded."""
    rows = conn.execute(
        select(
            approvals.c.approval_id, approvals.c.task_id, approvals.c.tool, approvals.c.status,
            approvals.c.decided_by, approvals.c.decision_reason, events.c.recorded_at,
        )
        .join(events, events.c.seq == approvals.c.decided_seq)
        .where(approvals.c.decided_seq.is_not(None))
        .order_by(approvals.c.decided_seq.desc())
        .limit(limit)
    )
    return [Decided(r[0], r[1], r[2], r[3], r[4] or "", r[5] or "", r[6]) for r in rows]
