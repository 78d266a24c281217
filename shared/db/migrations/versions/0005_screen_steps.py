"""issue 6: browser and desktop steps (lock waits)

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30 06:15:00

A dom0 or cmd0 step holds its machine's screen lock while it runs: how long it waited
for the lock, and when it held it (workers/screen/lock.py).
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("step_runs", sa.Column("lock_wait_ms", sa.Float(), nullable=True))
    op.add_column("step_runs", sa.Column("locked_at", sa.DateTime(timezone=True),
                                         nullable=True))
    op.add_column("step_runs", sa.Column("unlocked_at", sa.DateTime(timezone=True),
                                         nullable=True))


def downgrade() -> None:
    op.drop_column("step_runs", "unlocked_at")
    op.drop_column("step_runs", "locked_at")
    op.drop_column("step_runs", "lock_wait_ms")
