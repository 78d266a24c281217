"""issue 12: which model providers each worker can serve, and its default model

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-02 09:00:00

- daemon_workers.model_providers: the providers (anthropic, openai, openai-chat) whose
  credentials the worker process holds in its environment; names only, never values.
- daemon_workers.agent_model: its SKILLQ_AGENT_MODEL, if set.
Per worker rather than per daemon: each worker process reads its own environment, and a
daemon's workers need not agree (only the one serving `agent` may hold a key).
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("daemon_workers", sa.Column("model_providers", postgresql.JSONB(),
                                              nullable=False, server_default="[]"))
    op.add_column("daemon_workers", sa.Column("agent_model", sa.String(200), nullable=True))


def downgrade() -> None:
    op.drop_column("daemon_workers", "agent_model")
    op.drop_column("daemon_workers", "model_providers")
