"""One settings tree, read from SKILLQ_* environment variables (and a .env file).

Nothing is read at import time: call ``get_settings()`` where a setting is needed.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SKILLQ_", env_file=".env", extra="ignore")

    vault: Path = Field(default=Path("vault"), description="the vault folder of skills")
    home: Path = Field(default=Path.home() / ".skillq",
                       description="local state: embedded servers, caches, secrets")
    broker_url: str | None = Field(default=None, description="Redis URL; unset = embedded")
    result_backend: str | None = Field(default=None, description="defaults to broker_url")
    database_url: str | None = Field(default=None, description="PostgreSQL URL; unset = "
                                     "embedded")
    discovery_ttl_s: float = Field(default=5.0, ge=0,
                                   description="how long a vault scan is reused")
    max_step_timeout_s: float = Field(default=3600, gt=0, description="the longest a step "
                                      "may run; the broker's visibility timeout exceeds it")
    result_ttl_s: int = Field(default=86400, gt=0, description="how long Celery keeps results")
    inline_output_bytes: int = Field(default=64 * 1024, ge=0, description="outputs larger "
                                     "than this travel by reference through the store")
    max_output_bytes: int = Field(default=64 * 1024 * 1024, gt=0,
                                  description="a step's outputs past this are refused")
    heartbeat_s: float = Field(default=5.0, gt=0, description="how often a running step "
                               "proves its worker alive")
    dead_after_s: float = Field(default=30.0, gt=0, description="a running step whose "
                                "heartbeat is older than this is re-dispatched")
    batch_target_ms: float = Field(default=200.0, ge=0, description="a quick step's fan-out "
                                   "items go several to a message, about this much of its "
                                   "recent average work each; 0 = one item per message")
    secrets_file: Path | None = Field(default=None, description="the 0600 secrets file; "
                                      "unset = <home>/secrets.toml")


def get_settings() -> Settings:
    return Settings()
