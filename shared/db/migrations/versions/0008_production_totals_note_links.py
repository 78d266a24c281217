"""issue 11: success rates over production runs, and the note each failure counted on

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-30 07:10:00

- skill_stats.prod_runs / prod_successes: a success rate is a production figure; a test
  case that is meant to fail (source test_window) is judged by its expectation in
  test_results, not counted as a failed run here.
- step_runs.note_id: the improvement note a production failure was counted on. A note
  aggregates repeats and keeps only the latest run's id, so without this a run's page
  cannot tell its own note from one another run left on the same step.
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

# The history recorded before this migration (shared/db/skill_stats.py rebuild() counts
# the same way).
_BACKFILL = (
    "UPDATE skill_stats s SET prod_runs = c.n, prod_successes = c.ok FROM ("
    "SELECT skill, count(*) AS n, count(*) FILTER (WHERE state = 'succeeded') AS ok "
    "FROM {table} WHERE source = 'production' AND state IN {final} GROUP BY skill) c "
    "WHERE s.skill = c.skill AND s.kind = '{kind}'")


def upgrade() -> None:
    for name in ("prod_runs", "prod_successes"):
        op.add_column("skill_stats", sa.Column(name, sa.BigInteger(), nullable=False,
                                               server_default="0"))
    op.execute(_BACKFILL.format(table="step_runs", kind="step",
                                final="('succeeded', 'failed', 'skipped')"))
    op.execute(_BACKFILL.format(table="pipeline_runs", kind="pipeline",
                                final="('succeeded', 'failed')"))
    # Nullable, no default: adding it rewrites nothing, however many attempts there are.
    op.add_column("step_runs", sa.Column("note_id", sa.Integer(), nullable=True))


def downgrade() -> None:
    op.drop_column("step_runs", "note_id")
    op.drop_column("skill_stats", "prod_successes")
    op.drop_column("skill_stats", "prod_runs")
