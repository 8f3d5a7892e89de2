"""deployments: served names with their production loop

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-29 15:00:00.000000
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "deployments",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("model_id", sa.String(length=32), nullable=False),
        sa.Column("log_traffic", sa.Boolean(), nullable=False),
        sa.Column("redact", sa.String(length=200), nullable=True),
        sa.Column("retention_days", sa.Float(), nullable=False),
        sa.Column("schedule", sa.String(length=100), nullable=True),
        sa.Column("min_feedback", sa.Integer(), nullable=False),
        sa.Column("learn_steps", sa.Integer(), nullable=False),
        sa.Column("eval_dataset_id", sa.String(length=32), nullable=True),
        sa.Column("feedback_dataset_id", sa.String(length=32), nullable=True),
        sa.Column("feedback_used", sa.Integer(), nullable=False),
        sa.Column("cycle", sa.JSON(), nullable=True),
        sa.Column("history", sa.JSON(), nullable=False),
        sa.Column("next_cycle_at", sa.Float(), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("name"),
    )


def downgrade() -> None:
    op.drop_table("deployments")
