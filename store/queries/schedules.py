"""Reads of the `schedules` table, each schedule with the time of the event that added it."""

from __future__ import annotations

from typing import NamedTuple

from sqlalchemy import Connection, select

from store.state import Schedule
from store.tables import events, schedules, tasks


class Added(NamedTuple):
    """A schedule's row, as the fold of the log holds it, and when the event that added it was recorded."""

    schedule: Schedule
    added_at: str


_COLUMNS = (*(schedules.c[name] for name in Schedule._fields), events.c.recorded_at)


def _query():
    return select(*_COLUMNS).join(events, events.c.seq == schedules.c.added_seq).order_by(schedules.c.added_seq)


def _record(row) -> Added:
    return Added(Schedule(*row[:-1]), row[-1])


def list_schedules(conn: Connection, *, include_removed: bool = False) -> list[Added]:
    """Schedules in the order they were added; removed ones only when asked."""
    q = _query()
    if not include_removed:
        q = q.where(schedules.c.removed_seq.is_(None))
    return [_record(row) for row in conn.execute(q)]


def load_schedule(conn: Connection, schedule_id: str) -> Added | None:
    row = conn.execute(_query().where(schedules.c.schedule_id == schedule_id)).fetchone()
    return None if row is None else _record(row)


def unsubmitted(conn: Connection) -> list[Added]:
    """Schedules (removed ones too) whose latest firing is recorded but its task is not: a crash between the appends."""
    q = (
        _query()
        .outerjoin(tasks, tasks.c.task_id == schedules.c.last_task_id)
        .where(schedules.c.last_task_id.is_not(None), tasks.c.task_id.is_(None))
    )
    return [_record(row) for row in conn.execute(q)]
