"""job auto_resume, auto_resumes, placement, gpus, memory_gb; device holds several GPUs

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-28 01:00:00.000000
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("auto_resume", sa.Integer(), nullable=False, server_default="2")
        )
        batch_op.add_column(
            sa.Column("auto_resumes", sa.Integer(), nullable=False, server_default="0")
        )
        batch_op.add_column(sa.Column("placement", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("gpus", sa.Integer(), nullable=False, server_default="1"))
        batch_op.add_column(sa.Column("memory_gb", sa.Float(), nullable=True))
        batch_op.alter_column(
            "device", existing_type=sa.String(length=16), type_=sa.String(length=64)
        )


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.alter_column(
            "device", existing_type=sa.String(length=64), type_=sa.String(length=16)
        )
        batch_op.drop_column("memory_gb")
        batch_op.drop_column("gpus")
        batch_op.drop_column("placement")
        batch_op.drop_column("auto_resumes")
        batch_op.drop_column("auto_resume")
