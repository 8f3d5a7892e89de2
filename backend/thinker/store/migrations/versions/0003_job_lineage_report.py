"""job lineage and report

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-26 15:35:00.000000
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("parent_model_id", sa.String(length=32), nullable=True))
        batch_op.add_column(sa.Column("report", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("retryable", sa.Boolean(), nullable=True))
        batch_op.create_index(
            batch_op.f("ix_jobs_parent_model_id"), ["parent_model_id"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_jobs_parent_model_id"))
        batch_op.drop_column("retryable")
        batch_op.drop_column("report")
        batch_op.drop_column("parent_model_id")
