"""skill_stats: running totals behind benchmarks.json aggregates

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30 05:40:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "skill_stats",
        sa.Column("skill", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("runs", sa.BigInteger(), nullable=False),
        sa.Column("successes", sa.BigInteger(), nullable=False),
        sa.Column("duration_ms_sum", sa.Float(), nullable=False),
        sa.Column("duration_n", sa.BigInteger(), nullable=False),
        sa.Column("cost_usd_sum", sa.Float(), nullable=False),
        sa.Column("last_run", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("skill", "kind"),
    )
    # benchmarks.json's window of an orchestrator: its newest finished runs.
    op.create_index("ix_pipeline_runs_skill_finished", "pipeline_runs",
                    ["skill", "finished_at"])
    # The history recorded before this table existed.
    op.execute(
        "INSERT INTO skill_stats SELECT skill, 'step', count(*), "
        "count(*) FILTER (WHERE state = 'succeeded'), coalesce(sum(duration_ms), 0), "
        "count(duration_ms), coalesce(sum(cost_usd), 0), max(finished_at) FROM step_runs "
        "WHERE state IN ('succeeded', 'failed', 'skipped') GROUP BY skill")
    op.execute(
        "INSERT INTO skill_stats SELECT skill, 'pipeline', count(*), "
        "count(*) FILTER (WHERE state = 'succeeded'), "
        "coalesce(sum(extract(epoch FROM finished_at - started_at) * 1000), 0), "
        "count(finished_at - started_at), 0, max(finished_at) FROM pipeline_runs "
        "WHERE state IN ('succeeded', 'failed') GROUP BY skill")


def downgrade() -> None:
    op.drop_table("skill_stats")
    op.drop_index("ix_pipeline_runs_skill_finished", table_name="pipeline_runs")
