"""Daemons (machines) and their worker processes, as they announce themselves."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import DateTime, ForeignKey, Integer, String, Text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from shared.db.models import Base


class Daemon(Base):
    """A machine serving skillq queues: what it has, refreshed by every heartbeat."""

    __tablename__ = "daemons"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    device_id: Mapped[str] = mapped_column(String(128))
    platform: Mapped[str] = mapped_column(String(16))
    role: Mapped[str] = mapped_column(String(16))
    capabilities: Mapped[list[str]] = mapped_column(JSONB)  # gpu, browser, desktop, ...
    # program -> path found, or None: looked for and absent (unlisted: never looked for)
    software: Mapped[dict[str, Any]] = mapped_column(JSONB)
    skills: Mapped[dict[str, Any]] = mapped_column(JSONB)  # skill -> version in its vault
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    heartbeat_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class DaemonWorker(Base):
    """One worker process of a daemon and the queues it consumes right now."""

    __tablename__ = "daemon_workers"

    node: Mapped[str] = mapped_column(String(200), primary_key=True)  # Celery node name
    daemon: Mapped[str] = mapped_column(ForeignKey("daemons.name", ondelete="CASCADE"),
                                        index=True)
    queues: Mapped[list[str]] = mapped_column(JSONB)
    pid: Mapped[int] = mapped_column(Integer)
    # Agent steps: the providers whose credentials this process holds (names, never
    # values) and its SKILLQ_AGENT_MODEL. Per worker: each reads its own environment.
    model_providers: Mapped[list[str]] = mapped_column(JSONB, default=list,
                                                       server_default="[]")
    agent_model: Mapped[str | None] = mapped_column(String(200), default=None)
    # The MCP servers its SKILLQ_MCP_SERVERS declares (names only): its own environment's.
    mcp_servers: Mapped[list[str]] = mapped_column(JSONB, default=list, server_default="[]")
    # The daemon key this process signs its task messages with (shared/daemon_key.py).
    key_fingerprint: Mapped[str | None] = mapped_column(String(64), default=None)
    # How this process isolates steps; NULL until the sandbox announces itself.
    sandbox: Mapped[str | None] = mapped_column(Text, default=None)
    heartbeat_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class WantedSoftware(Base):
    """A program some skill requires that daemons had not looked for: they look at their
    next heartbeat, so routing never guesses."""

    __tablename__ = "wanted_software"

    name: Mapped[str] = mapped_column(String(128), primary_key=True)
    asked_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
