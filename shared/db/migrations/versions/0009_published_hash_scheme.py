"""issue 11: which rules a published version's files were recorded under

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01 20:30:00

- published_versions.hash_scheme: 1 for versions published before a version held its
  test cases (benchmarks.json and bytecode caches were outside its files then), 2 after.
  A worker verifies a version by the rules it was published under, so an upgrade does
  not turn every published skill with test cases into a draft.
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("published_versions", sa.Column("hash_scheme", sa.Integer(),
                                                  nullable=False, server_default="1"))


def downgrade() -> None:
    op.drop_column("published_versions", "hash_scheme")
