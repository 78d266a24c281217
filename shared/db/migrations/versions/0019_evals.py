"""issue 45: evals and the runs each judged

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-07 21:30:00

- evals: one row per `skillq eval` (shared/db/eval_models.py).
- eval_results: each run it judged, with its case, arm and assertions.
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "evals",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("skill", sa.String(64), nullable=False),
        sa.Column("subject", sa.String(40), nullable=False),
        sa.Column("baseline", sa.String(40), nullable=True),
        sa.Column("runs_per_case", sa.Integer(), nullable=False),
        sa.Column("pass_rate", sa.Float(), nullable=True),
        sa.Column("baseline_pass_rate", sa.Float(), nullable=True),
        sa.Column("spent_usd", sa.Float(), nullable=False),
        sa.Column("stopped", sa.Text(), nullable=True),
        sa.Column("report", postgresql.JSONB(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False,
                  server_default=sa.func.now()),
    )
    op.create_index("ix_evals_skill_created", "evals", ["skill", "created_at"])
    op.create_table(
        "eval_results",
        sa.Column("id", sa.BigInteger(), primary_key=True, autoincrement=True),
        sa.Column("eval_id", sa.String(36), sa.ForeignKey("evals.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("arm", sa.String(16), nullable=False),
        sa.Column("skill", sa.String(64), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("form", sa.String(16), nullable=False),
        sa.Column("case_id", sa.String(128), nullable=False),
        sa.Column("run_id", sa.String(40), nullable=False),
        sa.Column("passed", sa.Boolean(), nullable=False),
        sa.Column("checks", postgresql.JSONB(), nullable=False),
        sa.Column("problems", postgresql.JSONB(), nullable=False),
        sa.Column("duration_ms", sa.Float(), nullable=True),
        sa.Column("tokens", sa.Integer(), nullable=False),
        sa.Column("cost_usd", sa.Float(), nullable=False),
    )
    op.create_index("ix_eval_results_skill_version", "eval_results", ["skill", "version"])


def downgrade() -> None:
    op.drop_table("eval_results")
    op.drop_table("evals")
