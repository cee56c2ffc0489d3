"""The event store: an append-only log in SQL, the projections folded from it, and replay."""

from store.errors import (
    AgentdError,
    ConcurrencyConflict,
    DatabaseCorrupt,
    DatabaseLocked,
    InvalidEvent,
    ProjectionMismatch,
    SchemaTooNew,
    StoreError,
    UnknownEventType,
)
from store.eventstore import ANY, NO_STREAM, EventStore
from store.events import Event, Recorded
from store.state import TaskState, TaskSummary, fold

__all__ = [
    "ANY",
    "NO_STREAM",
    "AgentdError",
    "ConcurrencyConflict",
    "DatabaseCorrupt",
    "DatabaseLocked",
    "Event",
    "EventStore",
    "InvalidEvent",
    "ProjectionMismatch",
    "Recorded",
    "SchemaTooNew",
    "StoreError",
    "TaskState",
    "TaskSummary",
    "UnknownEventType",
    "fold",
]
