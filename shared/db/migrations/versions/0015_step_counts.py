"""issue 16 (scale): an advance reads what changed, not every step row of the run

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-05 09:00:00

- step_runs.superseded: a later attempt of the same item exists (set when the planner
  adds it). A retrying or lost attempt stays in that state for good, so without this the
  planner could tell the ones still waiting for their next attempt from the ones already
  followed only by reading every attempt of the run.
- ix_step_runs_run_step_state (run_id, step_id, state, superseded, not_before): what the
  planner asks of a step (is an item still open, which failed, which retry is due, which
  attempt waits for its next one) is one index range each, however many items it has.
- ix_step_runs_run_child (run_id) WHERE child_run_id IS NOT NULL: a run's nested runs,
  found without reading its other step rows (a waiting client asks every 0.25 s).
- step_counts: the newest attempt of each step item, counted by state per (run, step),
  kept in the transactions that change the states (lifecycle/step_counts.py). A waiting
  client's progress reads these few rows instead of grouping every attempt of the run.
  No foreign key: inserting a row would take a key-share lock on the run's row, which the
  planner holds FOR UPDATE while it waits on step rows a worker may hold.
- st_step_runs_state_superseded: joint statistics of state and superseded. Nearly every
  retrying or lost attempt is superseded; taken as independent, PostgreSQL expects
  thousands of unfollowed ones in a wide step and picks a parallel scan (10 ms to start
  its workers) for what is an index probe finding none.
"""

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("step_runs", sa.Column("superseded", sa.Boolean(), nullable=False,
                                         server_default=sa.false()))
    op.execute(
        "UPDATE step_runs s SET superseded = true WHERE s.state IN ('retrying', 'lost') "
        "AND EXISTS (SELECT 1 FROM step_runs n WHERE n.run_id = s.run_id "
        "AND n.step_id = s.step_id AND n.item_index = s.item_index AND n.attempt > s.attempt)")
    op.create_index("ix_step_runs_run_step_state", "step_runs",
                    ["run_id", "step_id", "state", "superseded", "not_before"])
    op.execute("CREATE STATISTICS st_step_runs_state_superseded (mcv) ON state, superseded "
               "FROM step_runs")
    op.create_index("ix_step_runs_run_child", "step_runs", ["run_id"],
                    postgresql_where=sa.text("child_run_id IS NOT NULL"))
    op.create_table(
        "step_counts",
        sa.Column("run_id", sa.String(length=40), nullable=False),
        sa.Column("step_id", sa.String(length=64), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("items", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("run_id", "step_id", "state"),
    )
    # The attempts recorded before this table existed.
    op.execute(
        "INSERT INTO step_counts SELECT run_id, step_id, state, count(*) FROM step_runs "
        "WHERE NOT superseded GROUP BY run_id, step_id, state")


def downgrade() -> None:
    op.drop_table("step_counts")
    op.drop_index("ix_step_runs_run_child", table_name="step_runs")
    op.execute("DROP STATISTICS IF EXISTS st_step_runs_state_superseded")
    op.drop_index("ix_step_runs_run_step_state", table_name="step_runs")
    op.drop_column("step_runs", "superseded")
