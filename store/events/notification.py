"""Events of the notification queue: something happened between turns, and a task's request took it in."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from store.events._base import Event

NOTIFICATIONS_STREAM = "notifications"

Source = Literal["file_watcher", "job", "approval", "skill_catalog", "mcp_server", "operator"]


class NotificationEnqueued(Event):
    """A harness event worth telling the tasks it concerns, recorded on the one queue stream."""

    notification_id: str
    source: Source
    kind: str = Field(min_length=1)
    tasks: tuple[str, ...] = Field(min_length=1)
    payload: dict[str, Any] = {}
    # Notifications with the same key, pending for the same task, are one notification: the latest.
    dedupe_key: str | None = None
    text: str = Field(min_length=1, description="what the model is told, one line")


class AdmittedNotification(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    notification_id: str
    source: Source
    kind: str
    text: str
    coalesced: tuple[str, ...] = ()


class NotificationsAdmitted(Event):
    """Recorded on the task's stream before the model call that carries them: each notification is
    admitted into exactly one request of each task it concerns, and this names which one."""

    call_index: int = Field(ge=1)
    items: tuple[AdmittedNotification, ...] = Field(min_length=1)
