"""Events of schedules: tasks submitted on a cron schedule, kept in the log rather than in a job store."""

from __future__ import annotations

from pydantic import Field

from store.events._base import Event
from store.events.task import EffectName

SCHEDULES_STREAM = "schedules"


class ScheduleAdded(Event):
    schedule_id: str
    cron: str = Field(min_length=1)
    timezone: str = "UTC"
    goal: str = Field(min_length=1)
    workspace: str
    profile: str = "workspace"
    tenant: str = "default"
    allowed_effects: tuple[EffectName, ...] = ("read",)


class ScheduleRemoved(Event):
    schedule_id: str


class ScheduleFired(Event):
    """One firing of a schedule, recorded with the task it submitted; a firing time is used once."""

    schedule_id: str
    fire_time: str
    task_id: str


class JobStarted(Event):
    """A background job a task started; it runs past the task's turn and reports when it ends."""

    job_id: str
    call_id: str
    command: str


class JobFinished(Event):
    job_id: str
    exit_code: int | None
    output_ref: str | None = None
    summary: str = ""
