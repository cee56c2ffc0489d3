"""The artifact index keeps each change's hash before as well as after, so a change can be shown and undone.

Rows already in the index are left with none: the logs that wrote them kept only the content after.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-04
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("artifacts", sa.Column("before_sha256", sa.String(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("artifacts") as batch:
        batch.drop_column("before_sha256")
