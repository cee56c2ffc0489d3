"""Indexes on approvals: the page counts the pending ones and lists the latest decisions on every load.

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


def downgrade() -> None:
    op.drop_index("ix_approvals_decided_seq", table_name="approvals")
    op.drop_index("ix_approvals_status", table_name="approvals")
