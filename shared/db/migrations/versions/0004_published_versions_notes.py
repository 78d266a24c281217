"""issue 4 items 1-5: published versions, test runs, improvement notes

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30 05:40:00
"""

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
