"""lifecycle/policy.py: the one place that says whether an attempt is tried again, and
whether a success is cached (docs/running.md, "Retries")."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from lifecycle import policy
from lifecycle.policy import AGENT_RETRIES, MAX_LOST, Cause, Ended, GiveUp, Retry
from shared.manifest import Manifest

NOW = datetime(2026, 12, 7, tzinfo=UTC)


def test_exit_75_is_retried_while_retries_last_with_a_growing_backoff() -> None:
    first = policy.after(Ended(Cause.TRANSIENT_EXIT, attempt=1, retries=2), NOW)
    second = policy.after(Ended(Cause.TRANSIENT_EXIT, attempt=2, retries=2), NOW)
    assert isinstance(first, Retry) and isinstance(second, Retry)
    assert first.rule == "RetryTransientExit"
    assert first.not_before is not None and second.not_before is not None
    # full jitter around 1 s, then 2 s
    assert NOW + timedelta(seconds=0.5) <= first.not_before <= NOW + timedelta(seconds=1.5)
    assert NOW + timedelta(seconds=1) <= second.not_before <= NOW + timedelta(seconds=3)
    assert isinstance(policy.after(Ended(Cause.TRANSIENT_EXIT, attempt=3, retries=2), NOW),
                      GiveUp)


def test_exit_75_without_declared_retries_fails_at_once() -> None:
    assert isinstance(policy.after(Ended(Cause.TRANSIENT_EXIT, attempt=1), NOW), GiveUp)


def test_backoff_is_capped() -> None:
    assert policy.backoff_s(30) <= policy.BACKOFF_CAP_S * 1.5


@pytest.mark.parametrize("attempt", range(1, AGENT_RETRIES + 1))
def test_a_model_unavailable_is_retried_up_to_its_limit(attempt: int) -> None:
    decided = policy.after(Ended(Cause.MODEL_UNAVAILABLE, attempt), NOW)
    assert isinstance(decided, Retry) and decided.rule == "RetryModelUnavailable"


def test_a_model_unavailable_past_its_limit_fails() -> None:
    assert isinstance(policy.after(Ended(Cause.MODEL_UNAVAILABLE, AGENT_RETRIES + 1), NOW),
                      GiveUp)


def test_a_lost_attempt_is_sent_again_at_once_until_the_limit() -> None:
    again = policy.after(Ended(Cause.LOST, attempt=1, losses=MAX_LOST - 1), NOW)
    assert isinstance(again, Retry) and again.not_before is None
    given_up = policy.after(Ended(Cause.LOST, attempt=MAX_LOST, losses=MAX_LOST), NOW)
    assert isinstance(given_up, GiveUp)
    assert given_up.why == f"its worker died {MAX_LOST} times running it"


def test_a_timeout_is_not_retried_even_with_retries_left() -> None:
    decided = policy.after(Ended(Cause.TIMEOUT, attempt=1, retries=5), NOW)
    assert isinstance(decided, GiveUp) and decided.rule == "NoRetryOnTimeout"


def test_any_other_failure_is_not_retried() -> None:
    assert isinstance(policy.after(Ended(Cause.ERROR, attempt=1, retries=5), NOW), GiveUp)


def _manifest(cache: dict[str, object]) -> Manifest:
    return Manifest.model_validate({
        "name": "cached", "description": "Caches. Use it in tests.",
        "run": {"command": "true"}, "cache": cache})


def test_a_success_is_cached_only_when_the_skill_caches() -> None:
    assert policy.cache_write(_manifest({"enabled": True, "ttl": 60}), "k") == \
        policy.CacheWrite("k", 60)
    assert policy.cache_write(_manifest({"enabled": False}), "k") is None
