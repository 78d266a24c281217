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


def get_settings() -> Settings:
    return Settings()
