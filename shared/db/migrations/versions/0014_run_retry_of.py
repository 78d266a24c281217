"""issue 14 (run operations): a run started by `skillq retry` names the run it retries

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-04 09:00:00

- pipeline_runs.retry_of: the run a retry started from (its failed steps run again, its
  succeeded steps' outputs are reused: lifecycle/retry.py); NULL for every other run.
  Indexed: a run's page lists the retries of it.
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("pipeline_runs", sa.Column("retry_of", sa.String(40), nullable=True))
    op.create_index("ix_pipeline_runs_retry_of", "pipeline_runs", ["retry_of"])


def downgrade() -> None:
    op.drop_index("ix_pipeline_runs_retry_of", table_name="pipeline_runs")
    op.drop_column("pipeline_runs", "retry_of")
