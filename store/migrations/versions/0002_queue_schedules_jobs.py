"""The notification queue, schedules and background jobs.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "notifications",
        sa.Column("notification_id", sa.String(64), primary_key=True),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("source", sa.String(32), nullable=False),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("dedupe_key", sa.String(400), nullable=True),
        sa.Column("enqueued_at", sa.String(32), nullable=False),
    )
    op.create_index("ix_notifications_seq", "notifications", ["seq"])
    op.create_table(
        "notification_targets",
        sa.Column("task_id", sa.String(200), sa.ForeignKey("tasks.task_id"), nullable=False),
        sa.Column("notification_id", sa.String(64), sa.ForeignKey("notifications.notification_id"), nullable=False),
        sa.Column("enqueued_seq", sa.BigInteger(), nullable=False),
        sa.Column("admitted_call", sa.Integer(), nullable=True),
        sa.Column("admitted_seq", sa.BigInteger(), nullable=True),
        sa.Column("coalesced_into", sa.String(64), nullable=True),
        sa.PrimaryKeyConstraint("task_id", "notification_id"),
        sqlite_with_rowid=False,
    )
    op.create_table(
        "schedules",
        sa.Column("schedule_id", sa.String(64), primary_key=True),
        sa.Column("cron", sa.String(200), nullable=False),
        sa.Column("timezone", sa.String(64), nullable=False),
        sa.Column("goal", sa.Text(), nullable=False),
        sa.Column("workspace", sa.Text(), nullable=False),
        sa.Column("profile", sa.String(64), nullable=False),
        sa.Column("tenant", sa.String(200), nullable=False),
        sa.Column("allowed_effects", sa.String(64), nullable=False),
        sa.Column("added_seq", sa.BigInteger(), nullable=False),
        sa.Column("removed_seq", sa.BigInteger(), nullable=True),
        sa.Column("fired", sa.Integer(), nullable=False),
        sa.Column("last_fire_time", sa.String(40), nullable=True),
        sa.Column("last_task_id", sa.String(200), nullable=True),
    )
    op.create_table(
        "jobs",
        sa.Column("job_id", sa.String(64), primary_key=True),
        sa.Column("task_id", sa.String(200), sa.ForeignKey("tasks.task_id"), nullable=False),
        sa.Column("call_id", sa.String(64), nullable=False),
        sa.Column("command", sa.Text(), nullable=False),
        sa.Column("started_seq", sa.BigInteger(), nullable=False),
        sa.Column("finished_seq", sa.BigInteger(), nullable=True),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("output_ref", sa.String(100), nullable=True),
    )
    op.create_index("ix_jobs_task_id", "jobs", ["task_id"])


def downgrade() -> None:
    for table in ("jobs", "schedules", "notification_targets", "notifications"):
        op.drop_table(table)
