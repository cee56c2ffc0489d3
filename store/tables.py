"""The SQL tables: the append-only event log and the projections folded from it."""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, Integer, PrimaryKeyConstraint, Text, UniqueConstraint
from sqlmodel import Field, SQLModel


# On SQLite only a column declared exactly INTEGER PRIMARY KEY is the rowid itself; BIGINT would add a
# second index to every insert. PostgreSQL gets a real 64-bit column.
SEQ = BigInteger().with_variant(Integer(), "sqlite")


class EventRow(SQLModel, table=True):
    """One event. Written once, never updated or deleted (triggers enforce it)."""

    __tablename__ = "events"
    __table_args__ = (UniqueConstraint("stream_id", "stream_version", name="uq_events_stream_version"),)

    # Assigned by the single writer under the write lock, not by an autoincrement, so that commit order
    # and seq order agree on every backend and a reader tailing `seq > cursor` never skips a row.
    seq: int = Field(sa_column=Column(SEQ, primary_key=True, autoincrement=False))
    stream_id: str = Field(max_length=200)
    stream_version: int
    type: str = Field(max_length=100)
    schema_version: int
    # Text, not a JSON column: the bytes written are the bytes exported.
    payload: str = Field(sa_column=Column(Text, nullable=False))
    recorded_at: str = Field(max_length=32)
    actor: str = Field(max_length=200)
    causation_id: str | None = Field(default=None, max_length=36)
    correlation_id: str | None = Field(default=None, max_length=36)


class TaskRow(SQLModel, table=True):
    """Canonical state of one task, as of `last_seq`."""

    __tablename__ = "tasks"

    task_id: str = Field(primary_key=True, max_length=200)
    goal: str = Field(sa_column=Column(Text, nullable=False))
    workspace: str = Field(sa_column=Column(Text, nullable=False))
    tenant: str = Field(max_length=200)
    # No index on phase: the table holds a row per task, and an index entry rewritten with every
    # event would be one more page in every commit.
    phase: str = Field(max_length=32)
    max_steps: int
    max_tokens: int
    steps: int
    tokens_used: int
    test_status: str | None = Field(default=None, max_length=16)
    # Indexed, unlike phase: written once when the task is submitted, and lists show the newest first.
    submitted_at: str = Field(max_length=32, index=True)
    updated_at: str = Field(max_length=32)
    finished_at: str | None = Field(default=None, max_length=32)
    version: int
    last_seq: int = Field(sa_column=Column(BigInteger, nullable=False))


# The per-task lists are clustered on (task_id, seq), WITHOUT ROWID on SQLite: one B-tree holds the
# rows in the order a task's page reads them, and an insert writes one page instead of a table page
# plus an index page.
CLUSTERED = {"sqlite_with_rowid": False}


class TaskActionRow(SQLModel, table=True):
    """A completed action of a task: one executed tool call."""

    __tablename__ = "task_actions"
    __table_args__ = (PrimaryKeyConstraint("task_id", "seq"), CLUSTERED)

    seq: int = Field(sa_column=Column(BigInteger, nullable=False))
    task_id: str = Field(foreign_key="tasks.task_id", max_length=200)
    call_id: str = Field(max_length=64)
    tool: str = Field(max_length=100)
    status: str = Field(max_length=32)


class ApprovalRow(SQLModel, table=True):
    """An approval a task asked for, and its decision once made."""

    __tablename__ = "approvals"

    approval_id: str = Field(primary_key=True, max_length=64)
    task_id: str = Field(foreign_key="tasks.task_id", max_length=200, index=True)
    call_id: str = Field(max_length=64)
    tool: str = Field(max_length=100)
    arguments_hash: str = Field(max_length=64)
    # Indexed: every page counts the pending approvals, and lists the latest decisions.
    status: str = Field(max_length=16, index=True)
    reason: str = Field(sa_column=Column(Text, nullable=False))
    expires_at: str | None = Field(default=None, max_length=32)
    requested_seq: int = Field(sa_column=Column(BigInteger, nullable=False))
    decided_seq: int | None = Field(default=None, sa_column=Column(BigInteger, nullable=True, index=True))
    decided_by: str | None = Field(default=None, max_length=200)
    decision_reason: str | None = Field(default=None, sa_column=Column(Text, nullable=True))


class ArtifactRow(SQLModel, table=True):
    """The artifact index: every file a task read, wrote or deleted, with its hash and test result."""

    __tablename__ = "artifacts"
    __table_args__ = (PrimaryKeyConstraint("task_id", "seq"), CLUSTERED)

    seq: int = Field(sa_column=Column(BigInteger, nullable=False))
    task_id: str = Field(foreign_key="tasks.task_id", max_length=200)
    path: str = Field(sa_column=Column(Text, nullable=False))
    operation: str = Field(max_length=16)
    sha256: str | None = Field(default=None, max_length=64)
    size: int | None = Field(default=None, sa_column=Column(BigInteger, nullable=True))
    test_status: str | None = Field(default=None, max_length=16)
    test_seq: int | None = Field(default=None, sa_column=Column(BigInteger, nullable=True))




class NotificationRow(SQLModel, table=True):
    """The notification queue: every harness event worth telling a task, in enqueue order."""

    __tablename__ = "notifications"

    notification_id: str = Field(primary_key=True, max_length=64)
    seq: int = Field(sa_column=Column(BigInteger, nullable=False, index=True))
    source: str = Field(max_length=32)
    kind: str = Field(max_length=64)
    text: str = Field(sa_column=Column(Text, nullable=False))
    payload: str = Field(sa_column=Column(Text, nullable=False))
    dedupe_key: str | None = Field(default=None, max_length=400)
    enqueued_at: str = Field(max_length=32)


class NotificationTargetRow(SQLModel, table=True):
    """One notification for one task, and the request it was admitted into (or coalesced into)."""

    __tablename__ = "notification_targets"
    __table_args__ = (PrimaryKeyConstraint("task_id", "notification_id"), CLUSTERED)

    task_id: str = Field(foreign_key="tasks.task_id", max_length=200)
    notification_id: str = Field(foreign_key="notifications.notification_id", max_length=64)
    enqueued_seq: int = Field(sa_column=Column(BigInteger, nullable=False))
    admitted_call: int | None = None
    admitted_seq: int | None = Field(default=None, sa_column=Column(BigInteger, nullable=True))
    coalesced_into: str | None = Field(default=None, max_length=64)


class ScheduleRow(SQLModel, table=True):
    """A cron schedule that submits tasks; its firings are events, so a restart neither loses nor repeats one."""

    __tablename__ = "schedules"

    schedule_id: str = Field(primary_key=True, max_length=64)
    cron: str = Field(max_length=200)
    timezone: str = Field(max_length=64)
    goal: str = Field(sa_column=Column(Text, nullable=False))
    workspace: str = Field(sa_column=Column(Text, nullable=False))
    profile: str = Field(max_length=64)
    tenant: str = Field(max_length=200)
    allowed_effects: str = Field(max_length=64)
    added_seq: int = Field(sa_column=Column(BigInteger, nullable=False))
    removed_seq: int | None = Field(default=None, sa_column=Column(BigInteger, nullable=True))
    fired: int = 0
    last_fire_time: str | None = Field(default=None, max_length=40)
    last_task_id: str | None = Field(default=None, max_length=200)


class JobRow(SQLModel, table=True):
    """A background job a task started, and how it ended."""

    __tablename__ = "jobs"

    job_id: str = Field(primary_key=True, max_length=64)
    task_id: str = Field(foreign_key="tasks.task_id", max_length=200, index=True)
    call_id: str = Field(max_length=64)
    command: str = Field(sa_column=Column(Text, nullable=False))
    started_seq: int = Field(sa_column=Column(BigInteger, nullable=False))
    finished_seq: int | None = Field(default=None, sa_column=Column(BigInteger, nullable=True))
    exit_code: int | None = None
    output_ref: str | None = Field(default=None, max_length=100)


PROJECTION_TABLES = (
    TaskRow.__table__,
    TaskActionRow.__table__,
    ApprovalRow.__table__,
    ArtifactRow.__table__,
    NotificationRow.__table__,
    NotificationTargetRow.__table__,
    ScheduleRow.__table__,
    JobRow.__table__,
)
