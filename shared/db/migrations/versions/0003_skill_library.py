"""issue 4 item 6-7: the skill library (enable/disable, soft delete, pins, labels, defaults)

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30 05:40:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "library_skills",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("vault", sa.Text(), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=True),
        sa.Column("slug", sa.String(length=64), nullable=False),
        sa.Column("label", sa.String(length=120), nullable=True),
        sa.Column("enabled", sa.Boolean(), server_default=sa.text("true"), nullable=False),
        sa.Column("pinned_order", sa.Integer(), nullable=True),
        sa.Column("default_hash", sa.String(length=71), nullable=True),
        sa.Column("default_version", sa.Integer(), nullable=True),
        sa.Column("archived_path", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"),
                  nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"),
                  nullable=False),
        sa.Column("deleted_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.CheckConstraint("pinned_order >= 0 AND pinned_order < 10",
                           name="ck_library_skills_pin_range"),
        sa.CheckConstraint("(name IS NULL) = (deleted_at IS NOT NULL)",
                           name="ck_library_skills_tombstone"),
    )
    op.create_index("uq_library_skills_live_name", "library_skills", ["vault", "name"],
                    unique=True, postgresql_where=sa.text("name IS NOT NULL"))
    op.create_index("ix_library_skills_vault_slug", "library_skills", ["vault", "slug"])
    op.create_index("uq_library_skills_pin", "library_skills", ["vault", "pinned_order"],
                    unique=True, postgresql_where=sa.text("pinned_order IS NOT NULL"))


def downgrade() -> None:
    op.drop_index("uq_library_skills_pin", table_name="library_skills")
    op.drop_index("ix_library_skills_vault_slug", table_name="library_skills")
    op.drop_index("uq_library_skills_live_name", table_name="library_skills")
    op.drop_table("library_skills")
