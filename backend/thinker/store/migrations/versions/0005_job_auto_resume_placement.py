"""job auto_resume, auto_resumes, placement

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


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_column("placement")
        batch_op.drop_column("auto_resumes")
        batch_op.drop_column("auto_resume")
