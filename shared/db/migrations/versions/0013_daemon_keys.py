"""issue 13 (isolation): daemon keys for signed task messages; a worker's key and sandbox

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-03 09:00:00

- daemon_keys: the Ed25519 public keys whose signatures workers accept on task messages
  (docs/security.md, "Messages between daemons"). A fingerprint is never deleted: a
  revoked one keeps its row (revoked_at), so it is never enrolled again.
- daemon_workers.key_fingerprint: the key this worker process signs with (announced).
- daemon_workers.sandbox: how this worker isolates steps (filled by the sandbox work;
  NULL until then).
"""

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "daemon_keys",
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column("daemon", sa.String(length=64), nullable=False),
        sa.Column("public_key", sa.Text(), nullable=False),
        sa.Column("enrolled_via", sa.String(length=16), nullable=False),
        sa.Column("enrolled_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("fingerprint"),
    )
    op.create_index("ix_daemon_keys_daemon", "daemon_keys", ["daemon"])
    op.add_column("daemon_workers", sa.Column("key_fingerprint", sa.String(64), nullable=True))
    op.add_column("daemon_workers", sa.Column("sandbox", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("daemon_workers", "sandbox")
    op.drop_column("daemon_workers", "key_fingerprint")
    op.drop_index("ix_daemon_keys_daemon", table_name="daemon_keys")
    op.drop_table("daemon_keys")
