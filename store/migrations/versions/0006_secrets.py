"""The vault: each secret found in a task's text, encrypted, under the number its placeholder shows.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-07
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "secrets",
        sa.Column("task_id", sa.String(200), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("sealed", sa.Text(), nullable=False),
        sa.Column("recorded_at", sa.String(32), nullable=False),
        sa.PrimaryKeyConstraint("task_id", "number"),
        sa.UniqueConstraint("task_id", "digest", name="uq_secrets_task_digest"),
    )


def downgrade() -> None:
    op.drop_table("secrets")
