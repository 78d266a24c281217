"""issue 12: the sub-skill runs an agent step started with execute_skill

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01 21:00:00

- pipeline_runs.agent_call: "<run>/<step>/<item>#<tool call id>" for a run an agent step
  started through its execute_skill tool, unique: the step item (whichever attempt)
  finds the run of a call again when it replays its turns, so a call starts one run.
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("pipeline_runs", sa.Column("agent_call", sa.String(255), nullable=True))
    op.create_index("uq_pipeline_runs_agent_call", "pipeline_runs", ["agent_call"],
                    unique=True, postgresql_where=sa.text("agent_call IS NOT NULL"))


def downgrade() -> None:
    op.drop_index("uq_pipeline_runs_agent_call", table_name="pipeline_runs")
    op.drop_column("pipeline_runs", "agent_call")
