"""Whether an attempt that did not succeed is tried again, and whether a success is
cached: decided here and nowhere else, as named rules (Prefect's core_policy is the
model). A worker asks when its attempt ends (workers/executors/), the planner when it
finds an attempt lost (lifecycle/planner/revive.py); both record what the rule said.

The rules, in the order they are asked (docs/running.md, "Retries"):

- RetryTransientExit: a script or screen step that exits 75 (EX_TEMPFAIL) is tried again
  while it has retries left (its ``run.retries``), after an exponential backoff.
- RetryModelUnavailable: an agent step whose model answered 408, 409, 429 or 5xx, or
  whose MCP server could not be reached, is tried again up to AGENT_RETRIES times.
- RedispatchLost: an attempt whose process died (a killed worker, a dead pool process,
  a stopped heartbeat) is sent again at once, up to MAX_LOST losses of the item.
- NoRetryOnTimeout: a step that ran out its timeout is not tried again: it was given
  all the time it declared, and a second try would take as long.
- Anything else (a non-zero exit, bad output, a model's bad answer) fails the step.

CacheInsertion: a succeeded attempt of a skill with ``cache.enabled`` is written to the
cache under its key for ``cache.ttl`` seconds; nothing else is.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from shared.manifest import Manifest

BACKOFF_BASE_S = 1.0
BACKOFF_CAP_S = 60.0
AGENT_RETRIES = 3
MAX_LOST = 3


class Cause(StrEnum):
    """Why an attempt did not succeed, as the rules read it."""

    TRANSIENT_EXIT = "transient_exit"  # exit 75
    MODEL_UNAVAILABLE = "model_unavailable"  # 408/409/429/5xx, or an MCP server down
    LOST = "lost"  # its process died
    TIMEOUT = "timeout"
    ERROR = "error"  # anything else


@dataclass(frozen=True, slots=True)
class Ended:
    """An attempt that did not succeed. ``attempt``: its number (1 for the first);
    ``retries``: what its skill declares (``run.retries``); ``losses``: how many of
    its item's attempts were lost, this one included."""

    cause: Cause
    attempt: int
    retries: int = 0
    losses: int = 0


@dataclass(frozen=True, slots=True)
class Retry:
    rule: str
    not_before: datetime | None  # None: at once


@dataclass(frozen=True, slots=True)
class GiveUp:
    rule: str
    why: str  # what the step's error says of the giving up ("" when the error says it)


@dataclass(frozen=True, slots=True)
class CacheWrite:
    key: str
    ttl_s: int


def backoff_s(attempt: int) -> float:
    """Exponential with full jitter around it, so retries of many items spread out."""
    base = min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2 ** (attempt - 1))
    return float(base * random.uniform(0.5, 1.5))  # noqa: S311 - jitter, not security


def after(ended: Ended, now: datetime) -> Retry | GiveUp:
    """What the rules say of an attempt that did not succeed."""
    if ended.cause is Cause.TRANSIENT_EXIT:
        if ended.attempt <= ended.retries:
            return Retry("RetryTransientExit", now + timedelta(seconds=backoff_s(ended.attempt)))
        return GiveUp("RetryTransientExit", f"exit 75 on each of {ended.attempt} attempts")
    if ended.cause is Cause.MODEL_UNAVAILABLE:
        if ended.attempt <= AGENT_RETRIES:
            return Retry("RetryModelUnavailable",
                         now + timedelta(seconds=backoff_s(ended.attempt)))
        return GiveUp("RetryModelUnavailable", "")
    if ended.cause is Cause.LOST:
        if ended.losses < MAX_LOST:
            return Retry("RedispatchLost", None)
        return GiveUp("RedispatchLost", f"its worker died {MAX_LOST} times running it")
    if ended.cause is Cause.TIMEOUT:
        return GiveUp("NoRetryOnTimeout", "")
    return GiveUp("FailOnError", "")


def cache_write(manifest: Manifest, key: str) -> CacheWrite | None:
    """CacheInsertion: where a succeeded attempt's outputs are cached, if anywhere."""
    if not manifest.cache.enabled:
        return None
    return CacheWrite(key, manifest.cache.ttl)
