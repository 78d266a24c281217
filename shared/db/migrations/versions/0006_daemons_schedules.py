"""issue 5: daemons, routing, schedules

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-30 06:15:00
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    _upgrade_daemons()
    _upgrade_schedules()


def downgrade() -> None:
    _downgrade_schedules()
    _downgrade_daemons()


def _upgrade_daemons() -> None:
    op.create_table(
        "daemons",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("device_id", sa.String(length=128), nullable=False),
        sa.Column("platform", sa.String(length=16), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("capabilities", postgresql.JSONB(), nullable=False),
        sa.Column("software", postgresql.JSONB(), nullable=False),
        sa.Column("skills", postgresql.JSONB(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name"),
    )
    op.create_table(
        "daemon_workers",
        sa.Column("node", sa.String(length=200), nullable=False),
        sa.Column("daemon", sa.String(length=64), nullable=False),
        sa.Column("queues", postgresql.JSONB(), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["daemon"], ["daemons.name"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("node"),
    )
    op.create_index("ix_daemon_workers_daemon", "daemon_workers", ["daemon"])
    op.create_table(
        "wanted_software",
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("asked_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name"),
    )
    # Where each step attempt was sent, and why (shown by `skillq run-show`).
    op.add_column("step_runs", sa.Column("route", sa.Text(), nullable=True))


def _downgrade_daemons() -> None:
    op.drop_column("step_runs", "route")
    op.drop_table("wanted_software")
    op.drop_index("ix_daemon_workers_daemon", table_name="daemon_workers")
    op.drop_table("daemon_workers")
    op.drop_table("daemons")


def _upgrade_schedules() -> None:
    """schedules (shared/db/schedule_models.py): cron lines `skillq beat` fires."""
    op.create_table(
        "schedules",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("skill", sa.String(length=64), nullable=False),
        sa.Column("cron", sa.String(length=128), nullable=False),
        sa.Column("tz", sa.String(length=64), nullable=False),
        sa.Column("inputs", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("vault", sa.Text(), nullable=False),
        sa.Column("workdir", sa.Text(), nullable=False),
        sa.Column("catch_up", sa.String(length=8), nullable=False),
        sa.Column("paused", sa.Boolean(), nullable=False),
        sa.Column("next_due_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_due_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_outcome", sa.String(length=16), nullable=True),
        sa.Column("last_run_id", sa.String(length=40), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("created_by", sa.String(length=128), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True),
                  server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_schedules_skill", "schedules", ["skill"])
    op.create_index("ix_schedules_next_due_at", "schedules", ["next_due_at"])


def _downgrade_schedules() -> None:
    op.drop_index("ix_schedules_next_due_at", table_name="schedules")
    op.drop_index("ix_schedules_skill", table_name="schedules")
    op.drop_table("schedules")
