"""issue 12: agent steps' durable turns

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01 21:00:00

- agent_turns: one row per model request of an agent step item (shared/db/agent_models.py),
  unique by (run_id, step_id, item_index, turn), so a retried or redelivered attempt
  replays the turns already paid for instead of sending them again.
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "agent_turns",
        sa.Column("id", sa.BigInteger(), primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(40), sa.ForeignKey("pipeline_runs.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("step_id", sa.String(64), nullable=False),
        sa.Column("item_index", sa.Integer(), nullable=False),
        sa.Column("turn", sa.Integer(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("model_requested", sa.String(200), nullable=False),
        sa.Column("model_served", sa.String(200), nullable=True),
        sa.Column("request_digest", sa.String(71), nullable=False),
        sa.Column("response", postgresql.JSONB(), nullable=False),
        sa.Column("tokens_in", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("tokens_out", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("cache_read", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("cache_write", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("cost_usd", sa.Float(), nullable=False, server_default="0"),
        sa.Column("duration_ms", sa.Float(), nullable=False, server_default="0"),
        sa.Column("stop_reason", sa.String(32), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False,
                  server_default=sa.func.now()),
        sa.UniqueConstraint("run_id", "step_id", "item_index", "turn",
                            name="uq_agent_turns_item_turn"),
    )


def downgrade() -> None:
    op.drop_table("agent_turns")
