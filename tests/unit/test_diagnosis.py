"""Diagnosis of a step's final failure, from what its record says."""

from __future__ import annotations

import pytest

from shared.diagnosis import Failure, Kind, diagnose


@pytest.mark.parametrize(("failure", "kind", "in_summary", "in_fix"), [
    (Failure("timeout", "timed out after 30 s (process group killed)", -15, timeout_s=30),
     Kind.TIMEOUT, "run.timeout (30 s)", "raise run.timeout"),
    (Failure("transient_exhausted", "HTTP 503 from api.example", 75, retries=3),
     Kind.TRANSIENT_EXHAUSTED, "after 3 retries: HTTP 503", "run.retries"),
    (Failure("bad_output", "missing declared output 'title' (string)", 0),
     Kind.BAD_OUTPUT, "missing declared output 'title'", "$SKILL_OUTPUT"),
    (Failure("invalid_outputs", "output 'n': expected integer", 0),
     Kind.BAD_OUTPUT, "output 'n'", "declared type"),
    (Failure("failed", "sh: 1: yt-dlp: not found", 127),
     Kind.MISSING_DEPENDENCY, "the command 'yt-dlp'", "requires.software"),
    (Failure("failed", "bash: ffmpeg: command not found", 127),
     Kind.MISSING_DEPENDENCY, "the command 'ffmpeg'", "install it"),
    (Failure("failed", "Traceback...\nModuleNotFoundError: No module named 'requests'", 1),
     Kind.MISSING_DEPENDENCY, "the Python module 'requests'", "install requests"),
    (Failure("failed", "cannot start 'nonexistent-tool --x': [Errno 2] No such file or "
             "directory: 'nonexistent-tool'", None),
     Kind.MISSING_DEPENDENCY, "missing on the worker", "run.command"),
    (Failure("missing_secret", "this worker lacks the secret(s) the skill declares: api_key "
             "(set SKILLQ_SECRET_API_KEY or `skillq secrets set api_key`)"),
     Kind.MISSING_DEPENDENCY, "lacks a secret", "skillq secrets set"),
    (Failure("missing_skill", "skill 'x' is not in this worker's vault /v"),
     Kind.MISSING_DEPENDENCY, "does not have this skill", "sync the vault"),
    (Failure("version_mismatch", "this worker's vault has x v1, the run wants v2"),
     Kind.MISSING_DEPENDENCY, "another version", "sync the vault"),
    (Failure("folder_changed", "refusing to run x v2: the folder /v/x differs from the "
             "published v2: changed run.py"),
     Kind.CHANGED_FILES, "differ from its published version", "skillq publish"),
    (Failure("version_not_published", "x v3 was never published"),
     Kind.MISSING_DEPENDENCY, "never published", "skillq versions"),
    (Failure("failed", "killed by signal 9 (Killed)", -9),
     Kind.KILLED, "signal 9", "out-of-memory"),
    (Failure("failed", "boom: cannot handle item 'b'", 1),
     Kind.NONZERO_EXIT, "exited with code 1: boom: cannot handle item 'b'", "exit 75"),
    (Failure("lost", "worker w@h stopped sending heartbeats"),
     Kind.LOST, "died repeatedly", "memory"),
    (Failure("internal", "internal error: KeyError: 'x'"),
     Kind.INTERNAL, "skillq itself", "skillq bug"),
    (Failure(None, None), Kind.UNKNOWN, "no class", "run-show"),
])
def test_failure_classes(failure: Failure, kind: Kind, in_summary: str, in_fix: str) -> None:
    found = diagnose(failure)
    assert found.kind is kind
    assert in_summary in found.summary
    assert in_fix in found.suggested_fix


def test_same_failure_same_diagnosis_class() -> None:
    # A note is one per (skill, version, step, diagnosis): differing details of one kind
    # of failure must land on the same class.
    a = diagnose(Failure("failed", "boom: item 'a'", 1))
    b = diagnose(Failure("failed", "boom: item 'b'\nmore lines", 2))
    assert a.kind == b.kind == Kind.NONZERO_EXIT


def test_summary_quotes_only_the_first_line() -> None:
    found = diagnose(Failure("bad_output", "\n\nfirst problem\nsecond problem", 0))
    assert "first problem" in found.summary and "second" not in found.summary
