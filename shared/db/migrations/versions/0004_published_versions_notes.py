"""issue 4 items 1-5: published versions, test runs, improvement notes

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30 05:40:00

Each feature keeps its tables in its own pair of functions below, called from
upgrade()/downgrade(), so the parts can be written (and read) separately.
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def _upgrade_published() -> None:
    """published_versions (shared/db/publish_models.py): one row per published version."""
    op.create_table(
        "published_versions",
        sa.Column("skill", sa.String(length=64), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("folder_hash", sa.String(length=71), nullable=False),
        sa.Column("files", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("skill_md", sa.Text(), nullable=False),
        sa.Column("manifest", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("sub_skills", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("published_by", sa.String(length=128), nullable=False),
        sa.Column("published_host", sa.String(length=255), nullable=False),
        sa.Column("published_from", sa.Text(), nullable=False),
        sa.Column("published_at", sa.DateTime(timezone=True),
                  server_default=sa.text("now()"), nullable=False),
        sa.Column("tests_passed", sa.Boolean(), nullable=True),
        sa.Column("rolled_back_from", sa.Integer(), nullable=True),
        sa.PrimaryKeyConstraint("skill", "version"),
    )


def _downgrade_published() -> None:
    op.drop_table("published_versions")


def _upgrade_notes() -> None:
    """improvement_notes and test_results (shared/db/notes_models.py)."""
    op.create_table(
        "improvement_notes",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("skill", sa.String(length=64), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("step_id", sa.String(length=64), nullable=False),
        sa.Column("pipeline", sa.String(length=64), nullable=False),
        sa.Column("run_id", sa.String(length=40), nullable=False),
        sa.Column("step_run_id", sa.String(length=160), nullable=False),
        sa.Column("error", sa.Text(), nullable=False),
        sa.Column("error_kind", sa.String(length=32), nullable=True),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("inputs", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("diagnosis", sa.String(length=32), nullable=False),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("suggested_fix", sa.Text(), nullable=False),
        sa.Column("worker", sa.String(length=200), nullable=True),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("first_seen", sa.DateTime(timezone=True), server_default=sa.text("now()"),
                  nullable=False),
        sa.Column("last_seen", sa.DateTime(timezone=True), server_default=sa.text("now()"),
                  nullable=False),
        sa.Column("closed_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    # One live note per (skill, version, step, diagnosis): repeats count up on it.
    op.create_index("uq_improvement_notes_live", "improvement_notes",
                    ["skill", "version", "step_id", "diagnosis"], unique=True,
                    postgresql_where=sa.text("status IN ('open', 'wontfix')"))
    op.create_index("ix_improvement_notes_skill_status", "improvement_notes",
                    ["skill", "status"])
    op.create_table(
        "test_results",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("skill", sa.String(length=64), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("test_id", sa.String(length=128), nullable=False),
        sa.Column("run_id", sa.String(length=40), nullable=True),
        sa.Column("passed", sa.Boolean(), nullable=False),
        sa.Column("problems", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("duration_ms", sa.Float(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"),
                  nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_test_results_skill_case", "test_results",
                    ["skill", "test_id", "created_at"])


def _downgrade_notes() -> None:
    op.drop_table("test_results")  # its indexes go with it
    op.drop_table("improvement_notes")


def upgrade() -> None:
    _upgrade_published()
    _upgrade_notes()


def downgrade() -> None:
    _downgrade_notes()
    _downgrade_published()
