"""The event store: an append-only log in SQL, the projections folded from it, and replay.

The names below load on first use: `store.errors` is imported by every command (agentd's root
error lives there), and it must not bring the SQL machinery with it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from store.errors import (
        AgentdError,
        ConcurrencyConflict,
        DatabaseCorrupt,
        DatabaseLocked,
        InvalidEvent,
        LogDamaged,
        ProjectionMismatch,
        SchemaTooNew,
        StoreError,
        UnknownEventType,
    )
    from store.events import Event, Recorded
    from store.eventstore import ANY, NO_STREAM, EventStore
    from store.state import TaskState, TaskSummary, fold

_WHERE = {
    **dict.fromkeys(
        ("AgentdError", "ConcurrencyConflict", "DatabaseCorrupt", "DatabaseLocked", "InvalidEvent", "LogDamaged",
         "ProjectionMismatch", "SchemaTooNew", "StoreError", "UnknownEventType"),
        "store.errors",
    ),
    **dict.fromkeys(("ANY", "NO_STREAM", "EventStore"), "store.eventstore"),
    **dict.fromkeys(("Event", "Recorded"), "store.events"),
    **dict.fromkeys(("TaskState", "TaskSummary", "fold"), "store.state"),
}

__all__ = [
    "ANY", "NO_STREAM", "AgentdError", "ConcurrencyConflict", "DatabaseCorrupt", "DatabaseLocked", "Event",
    "EventStore", "InvalidEvent", "LogDamaged", "ProjectionMismatch", "Recorded", "SchemaTooNew", "StoreError",
    "TaskState", "TaskSummary", "UnknownEventType", "fold",
]
assert sorted(__all__) == sorted(_WHERE)


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'store' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
