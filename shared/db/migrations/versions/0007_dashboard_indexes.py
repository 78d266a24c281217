"""issue 7: indexes behind the dashboard's paginated lists

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-30 06:40:00

Every dashboard list pages by keyset (the last row's sort key, never OFFSET), so each page
is an index range scan however many runs there are:
- a skill's runs, newest first: (skill, created_at, id);
- all top-level runs, newest first: (created_at, id) over runs with no parent step;
- notes by status, most recently seen first: (status, last_seen, id), and all of them:
  (last_seen, id).
"""

from alembic import op
from sqlalchemy import text

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_pipeline_runs_skill_created_id", "pipeline_runs",
                    ["skill", "created_at", "id"])
    op.create_index("ix_pipeline_runs_top_created_id", "pipeline_runs", ["created_at", "id"],
                    postgresql_where=text("parent_step_run_id IS NULL"))
    op.create_index("ix_improvement_notes_status_seen_id", "improvement_notes",
                    ["status", "last_seen", "id"])
    op.create_index("ix_improvement_notes_seen_id", "improvement_notes", ["last_seen", "id"])


def downgrade() -> None:
    op.drop_index("ix_improvement_notes_seen_id", table_name="improvement_notes")
    op.drop_index("ix_improvement_notes_status_seen_id", table_name="improvement_notes")
    op.drop_index("ix_pipeline_runs_top_created_id", table_name="pipeline_runs")
    op.drop_index("ix_pipeline_runs_skill_created_id", table_name="pipeline_runs")
