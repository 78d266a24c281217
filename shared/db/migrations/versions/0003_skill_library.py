"""issue 4 item 6-7: the skill library (enable/disable, soft delete, pins, labels, defaults)

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30 05:40:00
"""

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
