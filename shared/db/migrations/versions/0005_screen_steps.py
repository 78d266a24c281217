"""issue 6: browser and desktop steps (lock waits)

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30 06:15:00
"""

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
