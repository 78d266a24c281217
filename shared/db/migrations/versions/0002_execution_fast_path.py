"""issue 3 performance (owned by the execution work)

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30 05:40:00
"""

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
