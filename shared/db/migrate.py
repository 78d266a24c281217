"""Bring a database to the newest schema (Alembic), safely from many processes at once."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import text
from sqlalchemy.exc import ProgrammingError

from shared.db.session import engine_for

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS = Path(__file__).with_name("migrations")
_LOCK_ID = 0x5C111_0  # an arbitrary advisory-lock number owned by skillq migrations


def alembic_config(url: str) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


_REVISION = re.compile(r'^(down_)?revision\s*(?::[^=]*)?=\s*["\']?([\w-]+|None)["\']?', re.M)


@cache
def head_revision() -> str | None:
    """The newest migration's revision, read from the files (Alembic itself is slow
    for a command to import); None when they do not form one line."""
    revisions, parents = set(), set()
    for path in (MIGRATIONS / "versions").glob("*.py"):
        found = dict((bool(m.group(1)), m.group(2)) for m in _REVISION.finditer(
            path.read_text()))
        if False in found:
            revisions.add(found[False])
            parents.add(found.get(True, "None"))
    heads = revisions - parents
    return heads.pop() if len(heads) == 1 else None


def at_head(url: str) -> bool:
    """Whether the database's schema is the newest already (one query)."""
    head = head_revision()
    if head is None:
        return False
    try:
        with engine_for(url).connect() as conn:
            rows = conn.execute(text("select version_num from alembic_version")).all()
    except ProgrammingError:  # no alembic_version table: a new database
        return False
    return [r[0] for r in rows] == [head]


def upgrade(url: str) -> None:
    """Apply pending migrations; workers and CLIs starting together wait for each other.
    A database at the newest schema costs one query (every CLI command comes here)."""
    if at_head(url):
        return
    from alembic import command

    with engine_for(url).connect() as conn:
        conn.execute(text("select pg_advisory_lock(:id)"), {"id": _LOCK_ID})
        try:
            command.upgrade(alembic_config(url), "head")
        finally:
            conn.execute(text("select pg_advisory_unlock(:id)"), {"id": _LOCK_ID})
            conn.commit()
