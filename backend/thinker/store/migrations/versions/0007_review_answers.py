"""review_answers: a person's answers to a review job's queue

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-29 23:00:00.000000
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "review_answers",
        sa.Column("job_id", sa.String(length=32), nullable=False),
        sa.Column("pair", sa.Integer(), nullable=False),
        sa.Column("choice", sa.String(length=8), nullable=False),
        sa.Column("answered_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("job_id", "pair"),
    )


def downgrade() -> None:
    op.drop_table("review_answers")
