"""The append-only event log and the task and artifact projections.

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

SEQ = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "events",
        sa.Column("seq", SEQ, primary_key=True, autoincrement=False),
        sa.Column("stream_id", sa.String(200), nullable=False),
        sa.Column("stream_version", sa.Integer(), nullable=False),
        sa.Column("type", sa.String(100), nullable=False),
        sa.Column("schema_version", sa.Integer(), nullable=False),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("recorded_at", sa.String(32), nullable=False),
        sa.Column("actor", sa.String(200), nullable=False),
        sa.Column("causation_id", sa.String(36), nullable=True),
        sa.Column("correlation_id", sa.String(36), nullable=True),
        sa.UniqueConstraint("stream_id", "stream_version", name="uq_events_stream_version"),
    )
    op.create_table(
        "tasks",
        sa.Column("task_id", sa.String(200), primary_key=True),
        sa.Column("goal", sa.Text(), nullable=False),
        sa.Column("workspace", sa.Text(), nullable=False),
        sa.Column("tenant", sa.String(200), nullable=False),
        sa.Column("phase", sa.String(32), nullable=False),
        sa.Column("max_steps", sa.Integer(), nullable=False),
        sa.Column("max_tokens", sa.Integer(), nullable=False),
        sa.Column("steps", sa.Integer(), nullable=False),
        sa.Column("tokens_used", sa.Integer(), nullable=False),
        sa.Column("test_status", sa.String(16), nullable=True),
        sa.Column("submitted_at", sa.String(32), nullable=False),
        sa.Column("updated_at", sa.String(32), nullable=False),
        sa.Column("finished_at", sa.String(32), nullable=True),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("last_seq", sa.BigInteger(), nullable=False),
    )
    op.create_table(
        "task_actions",
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("task_id", sa.String(200), sa.ForeignKey("tasks.task_id"), nullable=False),
        sa.Column("call_id", sa.String(64), nullable=False),
        sa.Column("tool", sa.String(100), nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.PrimaryKeyConstraint("task_id", "seq"),
        sqlite_with_rowid=False,
    )
    op.create_table(
        "approvals",
        sa.Column("approval_id", sa.String(64), primary_key=True),
        sa.Column("task_id", sa.String(200), sa.ForeignKey("tasks.task_id"), nullable=False),
        sa.Column("call_id", sa.String(64), nullable=False),
        sa.Column("tool", sa.String(100), nullable=False),
        sa.Column("arguments_hash", sa.String(64), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("expires_at", sa.String(32), nullable=True),
        sa.Column("requested_seq", sa.BigInteger(), nullable=False),
        sa.Column("decided_seq", sa.BigInteger(), nullable=True),
        sa.Column("decided_by", sa.String(200), nullable=True),
        sa.Column("decision_reason", sa.Text(), nullable=True),
    )
    op.create_index("ix_approvals_task_id", "approvals", ["task_id"])
    op.create_table(
        "artifacts",
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("task_id", sa.String(200), sa.ForeignKey("tasks.task_id"), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("operation", sa.String(16), nullable=False),
        sa.Column("sha256", sa.String(64), nullable=True),
        sa.Column("size", sa.BigInteger(), nullable=True),
        sa.Column("test_status", sa.String(16), nullable=True),
        sa.Column("test_seq", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint("task_id", "seq"),
        sqlite_with_rowid=False,
    )
    _forbid_changes_to_events()


def _forbid_changes_to_events() -> None:
    """The log is append-only, and the database itself says no to anything else."""
    if op.get_bind().dialect.name == "sqlite":
        for verb in ("UPDATE", "DELETE"):
            op.execute(
                f"CREATE TRIGGER events_no_{verb.lower()} BEFORE {verb} ON events "
                f"BEGIN SELECT RAISE(ABORT, 'events are append-only: {verb} refused'); END"
            )
    else:
        op.execute(
            "CREATE FUNCTION events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$ "
            "BEGIN RAISE EXCEPTION 'events are append-only: % refused', TG_OP; END $$"
        )
        op.execute(
            "CREATE TRIGGER events_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON events "
            "FOR EACH STATEMENT EXECUTE FUNCTION events_append_only()"
        )


def downgrade() -> None:
    for table in ("artifacts", "approvals", "task_actions", "tasks", "events"):
        op.drop_table(table)
    if op.get_bind().dialect.name != "sqlite":
        op.execute("DROP FUNCTION IF EXISTS events_append_only()")
