"""Databases of a test's own on the stack's PostgreSQL server."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool


@contextlib.contextmanager
def fresh_database(database_url: str, label: str = "fresh") -> Iterator[str]:
    """A new, empty database beside ``database_url``'s, by URL; dropped afterwards."""
    source = make_url(database_url)
    name = f"skillq_{label}_{uuid.uuid4().hex[:8]}"
    admin = create_engine(source.set(database="postgres"), poolclass=NullPool,
                          isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield source.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
