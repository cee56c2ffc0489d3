"""Scoped memory projected into a table, so that a decision loads its subject's and tenant's memories
by a query instead of folding every tenant's memory events.

The table is filled from the memory events already in the log, in their order, by the same rules the
projection applies (store/memory_projection.py), so `agentd db check` agrees with it at once.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-07
"""

import sqlalchemy as sa
from alembic import op

from store import log, memory_projection

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "memories",
        sa.Column("memory_id", sa.String(16), primary_key=True),
        sa.Column("subject", sa.String(200), nullable=False),
        sa.Column("tenant", sa.String(200), nullable=False),
        sa.Column("purpose", sa.String(200), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("source", sa.String(32), nullable=False),
        sa.Column("recorded_seq", sa.BigInteger(), nullable=False),
        sa.Column("recorded_at", sa.String(32), nullable=False),
        sa.Column("expires_at", sa.String(40), nullable=True),
        sa.Column("review_at", sa.String(40), nullable=True),
        sa.Column("forgotten_seq", sa.BigInteger(), nullable=True),
        sa.Column("forgotten_at", sa.String(32), nullable=True),
        sa.Column("forgotten_reason", sa.Text(), nullable=True),
    )
    op.create_index("ix_memories_scope", "memories", ["tenant", "subject"])
    conn = op.get_bind()
    memory_projection.apply(conn, list(log.iter_records(conn, types=memory_projection.MEMORY_EVENT_TYPES)))


def downgrade() -> None:
    op.drop_index("ix_memories_scope", "memories")
    op.drop_table("memories")
