"""What a worker process needs, built once per process from its SKILLQ_* settings."""

from __future__ import annotations

import functools
import os
import socket
from dataclasses import dataclass
from pathlib import Path

from shared.errors import ConfigError
from shared.settings import Settings, get_settings


@dataclass(frozen=True)
class WorkerContext:
    settings: Settings
    database_url: str
    vault: Path
    hostname: str
    pid: int
    daemon: str | None = None  # recorded with each step this process runs


@functools.cache
def _context(pid: int) -> WorkerContext:
    settings = get_settings()
    if not settings.database_url:
        raise ConfigError("SKILLQ_DATABASE_URL is not set for this worker")
    return WorkerContext(settings=settings, database_url=settings.database_url,
                         vault=settings.vault.resolve(), hostname=socket.gethostname(),
                         pid=pid, daemon=settings.daemon or socket.gethostname())


def current() -> WorkerContext:
    """The context of this process (a forked pool child builds its own)."""
    return _context(os.getpid())
