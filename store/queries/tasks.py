"""Reads of the `tasks` table beyond one task's state: where a task stands, and the newest tasks."""

from __future__ import annotations

from typing import NamedTuple

from sqlalchemy import Connection, select

from store.summary import TaskSummary
from store.tables import tasks


class Standing(NamedTuple):
    """A task's phase and its stream's version, read together."""

    phase: str
    version: int


def standing(conn: Connection, task_id: str) -> Standing | None:
    row = conn.execute(select(tasks.c.phase, tasks.c.version).where(tasks.c.task_id == task_id)).first()
    return None if row is None else Standing(*row)


def newest_summaries(conn: Connection, limit: int) -> list[TaskSummary]:
    """Up to `limit` tasks, the most recently submitted first."""
    rows = conn.execute(
        select(*[tasks.c[n] for n in TaskSummary._fields])
        .order_by(tasks.c.submitted_at.desc(), tasks.c.task_id.desc())
        .limit(limit)
    )
    return [TaskSummary(*row) for row in rows]


def summaries(conn: Connection, phase: str | None = None, limit: int | None = None) -> list[TaskSummary]:
    """Tasks oldest first, in one phase if given."""
    q = select(*[tasks.c[name] for name in TaskSummary._fields]).order_by(tasks.c.submitted_at, tasks.c.task_id)
    if phase is not None:
        q = q.where(tasks.c.phase == phase)
    if limit is not None:
        q = q.limit(limit)
    return [TaskSummary(*row) for row in conn.execute(q)]
