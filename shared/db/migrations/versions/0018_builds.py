"""issue 44: skill builds (the plan, its revisions, each sub-skill's build)

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-07 17:40:00

- builds: one row per `skillq build`, keyed by its run (shared/db/build_models.py).
- draft_tool_results: what each builder tool call answered, for its replays.
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "builds",
        sa.Column("run_id", sa.String(40),
                  sa.ForeignKey("pipeline_runs.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("vault", sa.Text(), nullable=False),
        sa.Column("task", sa.Text(), nullable=False),
        sa.Column("stage", sa.String(16), nullable=False),
        sa.Column("round", sa.Integer(), nullable=False, server_default="1"),
        sa.Column("plan", postgresql.JSONB(), nullable=True),
        sa.Column("problems", postgresql.JSONB(), nullable=False, server_default="[]"),
        sa.Column("revisions", postgresql.JSONB(), nullable=False, server_default="[]"),
        sa.Column("skills", postgresql.JSONB(), nullable=False, server_default="{}"),
        sa.Column("note_id", sa.Integer(), nullable=True),
        sa.Column("improves", sa.String(64), nullable=True),
        sa.Column("daemon", sa.String(128), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False,
                  server_default=sa.func.now()),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False,
                  server_default=sa.func.now()),
    )


    op.create_table(
        "draft_tool_results",
        sa.Column("key", sa.String(255), primary_key=True),
        sa.Column("result", postgresql.JSONB(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False,
                  server_default=sa.func.now()),
    )


def downgrade() -> None:
    op.drop_table("draft_tool_results")
    op.drop_table("builds")
