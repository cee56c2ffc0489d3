"""Reads of the `schedules` table, each schedule with the time of the event that added it."""

from __future__ import annotations

from typing import NamedTuple

from sqlalchemy import Connection, select

from store.tables import events, schedules, tasks



class ScheduleRecord(NamedTuple):
    """A schedule as the tables hold it."""

    schedule_id: str
    cron: str
    timezone: str
    goal: str
    workspace: str
    profile: str
    tenant: str
    allowed_effects: tuple[str, ...]
    added_at: str
    removed: bool
    fired: int
    last_fire_time: str | None
    last_task_id: str | None


_COLUMNS = (
    schedules.c.schedule_id, schedules.c.cron, schedules.c.timezone, schedules.c.goal, schedules.c.workspace,
    schedules.c.profile, schedules.c.tenant, schedules.c.allowed_effects, events.c.recorded_at,
    schedules.c.removed_seq, schedules.c.fired, schedules.c.last_fire_time, schedules.c.last_task_id,
)


def _query():
    return select(*_COLUMNS).join(events, events.c.seq == schedules.c.added_seq).order_by(schedules.c.added_seq)


def _record(row) -> ScheduleRecord:
    (sid, cron, tz, goal, workspace, profile, tenant, effects, added_at, removed_seq, fired, last_fire, last_task) = row
    return ScheduleRecord(
        sid, cron, tz, goal, workspace, profile, tenant, tuple(effects.split(",")), added_at,
        removed_seq is not None, fired, last_fire, last_task,
    )


def list_schedules(conn: Connection, *, include_removed: bool = False) -> list[ScheduleRecord]:
    """Schedules in the order they were added; removed ones only when asked."""
    q = _query()
    if not include_removed:
        q = q.where(schedules.c.removed_seq.is_(None))
    return [_record(row) for row in conn.execute(q)]


def load_schedule(conn: Connection, schedule_id: str) -> ScheduleRecord | None:
    row = conn.execute(_query().where(schedules.c.schedule_id == schedule_id)).fetchone()
    return None if row is None else _record(row)


def unsubmitted(conn: Connection) -> list[ScheduleRecord]:
    """Schedules (removed ones too) whose latest firing is recorded but its task is not: a crash between the appends."""
    q = (
        _query()
        .outerjoin(tasks, tasks.c.task_id == schedules.c.last_task_id)
        .where(schedules.c.last_task_id.is_not(None), tasks.c.task_id.is_(None))
    )
    return [_record(row) for row in conn.execute(q)]
