"""Indexes for the web page: pending approvals counted on every load, the latest decisions, the newest tasks.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29
"""

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_approvals_status", "approvals", ["status"])
    op.create_index("ix_approvals_decided_seq", "approvals", ["decided_seq"])
    op.create_index("ix_tasks_submitted_at", "tasks", ["submitted_at"])


def downgrade() -> None:
    op.drop_index("ix_tasks_submitted_at", table_name="tasks")
    op.drop_index("ix_approvals_decided_seq", table_name="approvals")
    op.drop_index("ix_approvals_status", table_name="approvals")
