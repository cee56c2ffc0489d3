"""The SQL tables: the append-only event log and the projections folded from it.

Plain SQLAlchemy Core: nothing maps rows to objects (the store reads tuples into its own named
tuples), and the ORM and SQLModel would cost every command most of a second to import.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    UniqueConstraint,
)

metadata = MetaData()

# On SQLite only a column declared exactly INTEGER PRIMARY KEY is the rowid itself; BIGINT would add a
# second index to every insert. PostgreSQL gets a real 64-bit column.
SEQ = BigInteger().with_variant(Integer(), "sqlite")

# The per-task lists are clustered on (task_id, seq), WITHOUT ROWID on SQLite: one B-tree holds the
# rows in the order a task's page reads them, and an insert writes one page instead of a table page
# plus an index page.
CLUSTERED = {"sqlite_with_rowid": False}


def _text(name: str, nullable: bool = False) -> Column:
    return Column(name, Text, nullable=nullable)


def _string(name: str, length: int, nullable: bool = False, **kw) -> Column:
    return Column(name, String(length), nullable=nullable, **kw)


def _task_id(**kw) -> Column:
    return Column("task_id", String(200), ForeignKey("tasks.task_id"), nullable=False, **kw)


events = Table(
    "events",
    metadata,
    # One event, written once, never updated or deleted (triggers enforce it). Its seq is assigned by
    # the single writer under the write lock, not by an autoincrement, so that commit order and seq
    # order agree on every backend and a reader tailing `seq > cursor` never skips a row.
    Column("seq", SEQ, primary_key=True, autoincrement=False),
    _string("stream_id", 200),
    Column("stream_version", Integer, nullable=False),
    _string("type", 100),
    Column("schema_version", Integer, nullable=False),
    # Text, not a JSON column: the bytes written are the bytes exported.
    _text("payload"),
    _string("recorded_at", 32),
    _string("actor", 200),
    _string("causation_id", 36, nullable=True),
    _string("correlation_id", 36, nullable=True),
    # The chain (store/chain.py): this row's content and the row before's hash, hashed. Last, so that a
    # row's other columns keep their places. Null only in a row written behind the writer's back.
    _string("hash", 64, nullable=True),
    UniqueConstraint("stream_id", "stream_version", name="uq_events_stream_version"),
)

tasks = Table(
    "tasks",
    metadata,
    # Canonical state of one task, as of `last_seq`.
    _string("task_id", 200, primary_key=True),
    _text("goal"),
    _text("workspace"),
    _string("tenant", 200),
    # No index on phase: the table holds a row per task, and an index entry rewritten with every
    # event would be one more page in every commit.
    _string("phase", 32),
    Column("max_steps", Integer, nullable=False),
    Column("max_tokens", Integer, nullable=False),
    Column("steps", Integer, nullable=False),
    Column("tokens_used", Integer, nullable=False),
    _string("test_status", 16, nullable=True),
    # Indexed, unlike phase: written once when the task is submitted, and lists show the newest first.
    _string("submitted_at", 32, index=True),
    _string("updated_at", 32),
    _string("finished_at", 32, nullable=True),
    Column("version", Integer, nullable=False),
    Column("last_seq", BigInteger, nullable=False),
)

task_actions = Table(
    "task_actions",
    metadata,
    # A completed action of a task: one executed tool call.
    Column("seq", BigInteger, nullable=False),
    _task_id(),
    _string("call_id", 64),
    _string("tool", 100),
    _string("status", 32),
    PrimaryKeyConstraint("task_id", "seq"),
    **CLUSTERED,
)

tool_calls = Table(
    "tool_calls",
    metadata,
    # A tool call of a task as its events tell it (store/calls.py): proposed once, started (again only
    # where the live path would start it again), one result. Every call event is checked against it.
    _task_id(),
    _string("call_id", 64),
    _string("tool", 100),
    Column("proposed_seq", BigInteger, nullable=False),
    Column("started_seq", BigInteger, nullable=True),
    Column("idempotent", Boolean, nullable=True),
    Column("granted_seq", BigInteger, nullable=True),
    Column("finished_seq", BigInteger, nullable=True),
    _string("status", 32, nullable=True),
    PrimaryKeyConstraint("task_id", "call_id"),
    **CLUSTERED,
)

approvals = Table(
    "approvals",
    metadata,
    # An approval a task asked for, and its decision once made.
    _string("approval_id", 64, primary_key=True),
    _task_id(index=True),
    _string("call_id", 64),
    _string("tool", 100),
    _string("arguments_hash", 64),
    # Indexed: every page counts the pending approvals, and lists the latest decisions.
    _string("status", 16, index=True),
    _text("reason"),
    _string("expires_at", 32, nullable=True),
    Column("requested_seq", BigInteger, nullable=False),
    Column("decided_seq", BigInteger, nullable=True, index=True),
    _string("decided_by", 200, nullable=True),
    _text("decision_reason", nullable=True),
)

artifacts = Table(
    "artifacts",
    metadata,
    # The artifact index: every file a task read, created, changed or deleted (with its hash before and
    # after; both contents are in the artifact store), every file put back, and the test results.
    Column("seq", BigInteger, nullable=False),
    _task_id(),
    _text("path"),
    _string("operation", 16),
    _string("sha256", 64, nullable=True),
    Column("size", BigInteger, nullable=True),
    _string("test_status", 16, nullable=True),
    Column("test_seq", BigInteger, nullable=True),
    # Last, as the migration that added it put it.
    _string("before_sha256", 64, nullable=True),
    PrimaryKeyConstraint("task_id", "seq"),
    **CLUSTERED,
)

notifications = Table(
    "notifications",
    metadata,
    # The notification queue: every harness event worth telling a task, in enqueue order.
    _string("notification_id", 64, primary_key=True),
    Column("seq", BigInteger, nullable=False, index=True),
    _string("source", 32),
    _string("kind", 64),
    _text("text"),
    _text("payload"),
    _string("dedupe_key", 400, nullable=True),
    _string("enqueued_at", 32),
)

notification_targets = Table(
    "notification_targets",
    metadata,
    # One notification for one task, and the request it was admitted into (or coalesced into).
    _task_id(),
    Column("notification_id", String(64), ForeignKey("notifications.notification_id"), nullable=False),
    Column("enqueued_seq", BigInteger, nullable=False),
    Column("admitted_call", Integer, nullable=True),
    Column("admitted_seq", BigInteger, nullable=True),
    _string("coalesced_into", 64, nullable=True),
    PrimaryKeyConstraint("task_id", "notification_id"),
    **CLUSTERED,
)

schedules = Table(
    "schedules",
    metadata,
    # A cron schedule that submits tasks; its firings are events, so a restart neither loses nor
    # repeats one.
    _string("schedule_id", 64, primary_key=True),
    _string("cron", 200),
    _string("timezone", 64),
    _text("goal"),
    _text("workspace"),
    _string("profile", 64),
    _string("tenant", 200),
    _string("allowed_effects", 64),
    Column("added_seq", BigInteger, nullable=False),
    Column("removed_seq", BigInteger, nullable=True),
    Column("fired", Integer, nullable=False),
    _string("last_fire_time", 40, nullable=True),
    _string("last_task_id", 200, nullable=True),
)

jobs = Table(
    "jobs",
    metadata,
    # A background job a task started, and how it ended.
    _string("job_id", 64, primary_key=True),
    _task_id(index=True),
    _string("call_id", 64),
    _text("command"),
    Column("started_seq", BigInteger, nullable=False),
    Column("finished_seq", BigInteger, nullable=True),
    Column("exit_code", Integer, nullable=True),
    _string("output_ref", 100, nullable=True),
)

secrets = Table(
    "secrets",
    metadata,
    # The vault: a secret found in a task's text, shown everywhere else as `[secret:number]`. Not a
    # projection (no event holds the value, so replay cannot rebuild it) and no export carries it. The
    # value is encrypted under the data folder's vault.key; `digest` is its keyed hash, the same value
    # found again within the task gets the same number by it. No foreign key: a goal's secrets are kept
    # before the task's first event is.
    _string("task_id", 200),
    Column("number", Integer, nullable=False),
    _string("digest", 64),
    _string("kind", 32),
    _text("sealed"),
    _string("recorded_at", 32),
    PrimaryKeyConstraint("task_id", "number"),
    UniqueConstraint("task_id", "digest", name="uq_secrets_task_digest"),
)

memories = Table(
    "memories",
    metadata,
    # Scoped memory as the log leaves it (store/events/memory.py). A decision loads its memories by
    # subject and tenant in the query, so another tenant's memory is never read into its process. A
    # forgotten memory keeps its row as a tombstone with its text emptied: nothing reading the table can
    # hand the text on, and its id cannot be recorded again.
    _string("memory_id", 16, primary_key=True),
    _string("subject", 200),
    _string("tenant", 200),
    _string("purpose", 200),
    _text("text"),
    _string("source", 32),
    # The event that first recorded it; recorded_at is the latest's (a memory recorded again replaces it).
    Column("recorded_seq", BigInteger, nullable=False),
    _string("recorded_at", 32),
    _string("expires_at", 40, nullable=True),
    _string("review_at", 40, nullable=True),
    Column("forgotten_seq", BigInteger, nullable=True),
    _string("forgotten_at", 32, nullable=True),
    _text("forgotten_reason", nullable=True),
    Index("ix_memories_scope", "tenant", "subject"),
)

PROJECTION_TABLES = (
    tasks, task_actions, tool_calls, approvals, artifacts, notifications, notification_targets, schedules, jobs,
    memories,
)

workers = Table(
    "workers",
    metadata,
    # Each agentd that serves this database, and when it last said it was alive. Not a projection: who
    # runs where is the hosts' business, not the log's, and a restart of every worker loses nothing.
    _string("worker_id", 64, primary_key=True),
    _string("host", 255),
    Column("pid", Integer, nullable=False),
    _text("address"),
    # The workspace roots whose files this worker sees, one per line; empty for every workspace.
    _text("workspaces"),
    Column("started_at", Float, nullable=False),
    Column("heartbeat_at", Float, nullable=False),
    Column("stopped_at", Float, nullable=True),
)

leases = Table(
    "leases",
    metadata,
    # Which worker runs a task, until when. A row outlives its lease: an expired or released one is a
    # task free to take, and its row is what the next claimant locks.
    _string("task_id", 200, primary_key=True),
    _string("worker_id", 64, nullable=True),
    Column("acquired_at", Float, nullable=True),
    Column("expires_at", Float, nullable=False),
)

blobs = Table(
    "blobs",
    metadata,
    # Artifact bytes (as the artifact store keeps them: sealed if they hold a secret), named by the sha256
    # of what they hold, where several hosts serve one database and none has the others' files. Written
    # once per name and never changed. Not a projection: the log names artifacts by hash, it does not
    # hold them.
    _string("digest", 64, primary_key=True),
    Column("data", LargeBinary, nullable=False),
)
