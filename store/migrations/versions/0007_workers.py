"""Workers and their leases: several agentd processes serving one database, each task run by one.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-06
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "workers",
        sa.Column("worker_id", sa.String(64), primary_key=True),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("address", sa.Text(), nullable=False),
        sa.Column("workspaces", sa.Text(), nullable=False),
        sa.Column("started_at", sa.Float(), nullable=False),
        sa.Column("heartbeat_at", sa.Float(), nullable=False),
        sa.Column("stopped_at", sa.Float(), nullable=True),
    )
    op.create_table(
        "leases",
        sa.Column("task_id", sa.String(200), primary_key=True),
        sa.Column("worker_id", sa.String(64), nullable=True),
        sa.Column("acquired_at", sa.Float(), nullable=True),
        sa.Column("expires_at", sa.Float(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("leases")
    op.drop_table("workers")
