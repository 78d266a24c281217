"""issue 43: waits for a person (questions, approvals)

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-07 14:30:00

- waits: one row per question an agent step asked or approval step reached
  (shared/db/wait_models.py); an open one holds its step waiting, and no worker slot.
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "waits",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(40),
                  sa.ForeignKey("pipeline_runs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("step_id", sa.String(64), nullable=False),
        sa.Column("item_index", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(255), nullable=False, unique=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("skill", sa.String(64), nullable=False),
        sa.Column("prompt", sa.Text(), nullable=False),
        sa.Column("choices", postgresql.JSONB(), nullable=False, server_default="[]"),
        sa.Column("free_text", sa.Boolean(), nullable=False, server_default=sa.true()),
        sa.Column("default", postgresql.JSONB(), nullable=True),
        sa.Column("shown", postgresql.JSONB(), nullable=False, server_default="{}"),
        sa.Column("form", postgresql.JSONB(), nullable=False, server_default="[]"),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("answer", postgresql.JSONB(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("decided_by", sa.String(128), nullable=True),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False,
                  server_default=sa.func.now()),
        sa.Column("deadline_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("on_timeout", sa.String(16), nullable=False, server_default="reject"),
    )
    op.create_index("ix_waits_run_id", "waits", ["run_id"])
    op.create_index("ix_waits_open", "waits", ["run_id", "deadline_at"],
                    postgresql_where=sa.text("state = 'open'"))


def downgrade() -> None:
    op.drop_table("waits")
