"""The root of agentd's exception tree, and the errors of the event store.

Every error agentd raises on purpose derives from AgentdError, whatever layer raises it; the
runtime's own errors live in runtime/errors.py. Each message is fit for one line.
"""

from __future__ import annotations


class AgentdError(Exception):
    """Root of every error agentd raises on purpose; the CLI prints its message and exits non-zero."""

    exit_code = 1




class StoreError(AgentdError):
    """The event store cannot do what was asked."""


class DatabaseCorrupt(StoreError):
    """The database file is damaged or is not a database at all."""


class DatabaseLocked(StoreError):
    """Another process held the database lock for longer than the busy timeout."""


class SchemaTooNew(StoreError):
    """The database was written by a newer agentd; it is never migrated backwards."""


class ConcurrencyConflict(StoreError):
    """An append expected a stream version that is no longer current; nothing was written."""

    def __init__(self, stream_id: str, expected: int | None, actual: int) -> None:
        self.stream_id = stream_id
        self.expected = expected
        self.actual = actual
        super().__init__(
            f"stream {stream_id!r} is at version {actual}, not the expected {expected}; nothing was written"
        )


class UnknownEventType(StoreError):
    """The log holds an event type this agentd does not know."""

    def __init__(self, type_name: str, seq: int | None = None) -> None:
        self.type_name = type_name
        self.seq = seq
        where = f"event {seq} has" if seq is not None else "event has"
        super().__init__(f"{where} unknown type {type_name!r} (written by a newer agentd?)")


class InvalidEvent(StoreError):
    """An event payload does not match its type's schema."""

    def __init__(self, type_name: str, detail: str, seq: int | None = None) -> None:
        self.type_name = type_name
        self.seq = seq
        where = f"event {seq} ({type_name})" if seq is not None else f"{type_name} event"
        super().__init__(f"{where} has an invalid payload: {detail}")


class LogDamaged(StoreError):
    """The log is not the one that was committed: its chain breaks, or it is shorter than once recorded."""


class ProjectionMismatch(StoreError):
    """A projection rebuilt from the log differs from the live one."""
