"""dataset versions

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-26 05:23:13.064789
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("datasets", schema=None) as batch_op:
        batch_op.add_column(sa.Column("root_id", sa.String(length=32), nullable=True))
        # Existing datasets become version 1 of themselves.
        batch_op.add_column(sa.Column("version", sa.Integer(), nullable=False, server_default="1"))
        batch_op.add_column(sa.Column("parent_id", sa.String(length=32), nullable=True))
        batch_op.add_column(sa.Column("mapping", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("origin", sa.JSON(), nullable=True))
        batch_op.create_index(batch_op.f("ix_datasets_root_id"), ["root_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("datasets", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_datasets_root_id"))
        batch_op.drop_column("origin")
        batch_op.drop_column("mapping")
        batch_op.drop_column("parent_id")
        batch_op.drop_column("version")
        batch_op.drop_column("root_id")
