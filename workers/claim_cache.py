"""The cache entries of claimed attempts, looked up in their claim's transaction, so that
a cache hit costs no round trip of its own (claim.py answers it from them)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlalchemy.orm import Session

from lifecycle import transitions
from shared import cache
from shared.builtin import RESERVED as BUILTIN
from shared.inputs import with_defaults
from shared.vault import open_skill
from workers.step_types import Claim


def look_up_cache(session: Session, jobs: Sequence[Claim],
                   claimed: Mapping[str, transitions.Claimed]) -> None:
    """Set ``cached`` on the jobs whose skill caches: from what their claim found under
    the key of their stored inputs when that is the key their executor would use (the
    usual case: no default added), else from one query for the rest.

    Keyed as the executors key them, from the vault's copy of the skill; a job whose
    vault copy is missing or of another version than the run's, or whose skill is a
    built-in, is left to its executor (None), which looks its entry up for the skill it
    runs."""
    asked: dict[str, str] = {}  # by row id, the key of those their claim could not answer
    for job in jobs:
        # A built-in skill goes before the vault's (attempt_skill.skill_for)
        skill = open_skill(job.vault, job.skill) if job.skill not in BUILTIN else None
        if skill is None or not skill.manifest.cache.enabled \
                or skill.manifest.version != job.version:
            continue
        key = cache.cache_key(skill.name, skill.manifest.version,
                              with_defaults(skill.manifest, job.inputs))
        c = claimed.get(job.row_id)
        if c is not None and c.cache_key == key:
            job.cached = {key: c.cache_found[0]} if c.cache_found else {}
        else:
            asked[job.row_id] = key
    if not asked:
        return
    found = cache.lookup_many(session, sorted(set(asked.values())))
    for job in jobs:
        if job.row_id in asked:
            key = asked[job.row_id]
            job.cached = {key: found[key]} if key in found else {}
