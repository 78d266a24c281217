"""issue 5: daemons, routing, schedules

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-30 06:15:00
"""

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
