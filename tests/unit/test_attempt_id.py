"""Attempt ids (shared/attempt_id.py): every reader of "<run>/<step>/<item>/<attempt>"
goes through ``AttemptId.parse``, so what it gives back must be what was written."""

from __future__ import annotations

import pytest

from shared.attempt_id import AttemptId


@pytest.mark.parametrize(("text", "parsed"), [
    ("run-0123456789abcdef/fetch/-1/1", AttemptId("run-0123456789abcdef", "fetch", -1, 1)),
    ("run-1/split_pages/41/3", AttemptId("run-1", "split_pages", 41, 3)),
    ("run-1/my-skill/0/12", AttemptId("run-1", "my-skill", 0, 12)),
])
def test_parse_and_text_round_trip(text: str, parsed: AttemptId) -> None:
    assert AttemptId.parse(text) == parsed
    assert str(parsed) == text
    assert AttemptId.text(parsed.run_id, parsed.step_id, parsed.item, parsed.attempt) == text


def test_the_step_item_and_its_attempts() -> None:
    attempt = AttemptId.parse("run-1/fetch/7/2")
    assert attempt.item_key == "run-1/fetch/7"
    assert attempt.attempts_prefix == "run-1/fetch/7/"
    assert str(AttemptId("run-1", "fetch", 7, 3)).startswith(attempt.attempts_prefix)
    assert not "run-1/fetch/70/1".startswith(attempt.attempts_prefix)
    assert attempt.calls_prefix == "run-1/fetch/7#"  # an execute_skill call: + its tool call id


@pytest.mark.parametrize("text", [
    "", "run-1", "run-1/fetch", "run-1/fetch/-1", "/fetch/-1/1", "run-1//-1/1",
    "run-1/fetch/x/1", "run-1/fetch/-1/", "run-1/fetch/-1/1#call-1",
])
def test_a_malformed_id_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not an attempt id"):
        AttemptId.parse(text)
