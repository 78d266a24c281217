"""Output cache for deterministic skills: same skill, version and inputs, same outputs.

A key is computable in PostgreSQL from an attempt's row (``key_sql``), so a claim
looks its attempts' entries up in its own round trip (lifecycle/transitions/claims.py)."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from shared.db.models import CacheEntry
from shared.db.pipelined import plain
from shared.store import canonical_json


def input_hash(inputs: Any) -> str:
    return "sha256:" + hashlib.sha256(canonical_json(inputs)).hexdigest()


def cache_key(skill: str, version: int, inputs: Any) -> str:
    """SHA-256 of the skill's name, its version and its inputs' hash (``input_hash``)."""
    return key_of(skill, version, input_hash(inputs))


def key_of(skill: str, version: int, digest: str) -> str:
    """The cache key of ``skill`` at ``version`` for the inputs whose ``input_hash`` is
    ``digest``; ``key_sql`` computes the same in PostgreSQL, from an attempt's row."""
    return "sha256:" + hashlib.sha256(f"{skill}\n{version}\n{digest}".encode()).hexdigest()


def key_sql(skill: str, version: str, digest: str) -> str:
    """``key_of`` as an SQL expression over the columns named (the version an integer):
    a claim looks up the entry of the inputs its planner stored, in its own round trip.
    The version and the digest have fixed forms, so the key names one triple whatever
    the skill's name holds."""
    return (f"'sha256:' || encode(sha256(convert_to({skill} || chr(10) || {version} "
            f"|| chr(10) || {digest}, 'UTF8')), 'hex')")


def lookup(session: Session, key: str) -> CacheEntry | None:
    now = datetime.now(UTC)
    return session.scalars(select(CacheEntry).where(CacheEntry.key == key,
                                                    CacheEntry.expires_at > now)).first()


_LIVE = "SELECT key, outputs FROM cache_entries WHERE key = ANY(%(keys)s) AND expires_at > %(now)s"


def lookup_many(session: Session, keys: list[str]) -> dict[str, Any]:
    """Outputs by key, for the keys with a live entry (one query for a batch of items).

    Every claim of a cache-enabled step asks it, so it goes as psycopg sends it: through
    SQLAlchemy (an expanding IN, rendered again at each call) it was a large part of a
    lone cache hit's CPU."""
    with plain(session) as pg:
        rows = pg.execute(_LIVE, {"keys": keys, "now": datetime.now(UTC)}).fetchall()
    return {key: outputs for key, outputs in rows}


def store(session: Session, *, key: str, skill: str, version: int, outputs: Any, ttl_s: int,
          step_run_id: str) -> None:
    expires = datetime.now(UTC) + timedelta(seconds=ttl_s)
    values = {"key": key, "skill": skill, "version": version, "outputs": outputs,
              "step_run_id": step_run_id, "expires_at": expires}
    session.execute(insert(CacheEntry).values(**values).on_conflict_do_update(
        index_elements=[CacheEntry.key], set_=values))
