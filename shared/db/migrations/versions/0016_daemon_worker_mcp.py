"""issue 41: the MCP servers each worker declares

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-07 09:00:00

- daemon_workers.mcp_servers: the names of the MCP servers the worker process's
  SKILLQ_MCP_SERVERS declares (names only, never commands, URLs or credentials). Per
  worker rather than among the daemon's capabilities: each worker reads its own
  environment, and a daemon's capabilities are rewritten by whichever worker last beat,
  so a worker started without the setting took the servers off the whole daemon.
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("daemon_workers", sa.Column("mcp_servers", postgresql.JSONB(),
                                              nullable=False, server_default="[]"))


def downgrade() -> None:
    op.drop_column("daemon_workers", "mcp_servers")
