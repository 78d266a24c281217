"""Bring a database to the newest schema (Alembic), safely from many processes at once."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import text

from shared.db.session import engine_for

MIGRATIONS = Path(__file__).with_name("migrations")
_LOCK_ID = 0x5C111_0  # an arbitrary advisory-lock number owned by skillq migrations


def alembic_config(url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def upgrade(url: str) -> None:
    """Apply pending migrations; workers and CLIs starting together wait for each other."""
    with engine_for(url).connect() as conn:
        conn.execute(text("select pg_advisory_lock(:id)"), {"id": _LOCK_ID})
        try:
            command.upgrade(alembic_config(url), "head")
        finally:
            conn.execute(text("select pg_advisory_unlock(:id)"), {"id": _LOCK_ID})
            conn.commit()
