"""Credential isolation with real workers: a skill's process sees the secrets it declares
and nothing else of its worker's environment; a secret a script prints is found in no
record, note, worker log or benchmarks.json; a missing secret stops the step before its
process starts."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import VAULTS, RunResult, Stack, WorkerSpec, copy_vault, wait_until
from sqlalchemy import select

from shared.db.models import PipelineRun, StepRun
from shared.db.notes_models import ImprovementNote

pytestmark = pytest.mark.integration

RunSkill = Callable[..., RunResult]
DAEMON = "secretd"  # secret-peek is pinned to it (requires.daemon)
# What the script protocol puts in a script's environment (workers/script_executor.py),
# plus what Python itself may add (C-locale coercion).
PROTOCOL = {"PATH", "HOME", "LANG", "SKILL_INPUTS", "SKILL_OUTPUT", "SKILLQ_WORKDIR",
            "SKILLQ_STEP_RUN", "LC_CTYPE", "PYTHONDONTWRITEBYTECODE"}


@contextlib.contextmanager
def worker_with(stack: Stack, extra_env: dict[str, str]) -> Iterator[None]:
    """A worker of its own daemon, serving only that daemon's default queue, whose own
    environment also holds ``extra_env``; stopped afterwards."""
    spec = WorkerSpec(DAEMON, f"default@{DAEMON}", 1)
    standard_env = stack.env
    stack.env = {**standard_env, "SKILLQ_DAEMON": DAEMON, **extra_env}
    try:
        stack.start_worker(spec)
    finally:
        stack.env = standard_env
    node = f"{DAEMON}@{DAEMON}"  # a worker of a named daemon is named for the daemon
    try:
        wait_until(lambda: stack.app.control.ping(destination=[node], timeout=0.5), 60,
                   f"worker {node} to answer", every_s=0.1)
        yield
    finally:
        stack.workers.pop(DAEMON).stop()


def test_a_script_sees_its_secret_and_nothing_else_and_never_leaks_it(
        healthy: Stack, run_skill: RunSkill, tmp_path: Path) -> None:
    vault = copy_vault(VAULTS / "lifecycle", tmp_path / "vault")
    token, other = f"peek-{uuid.uuid4().hex}", f"other-{uuid.uuid4().hex}"
    unrelated = f"unrelated-{uuid.uuid4().hex}"
    with worker_with(healthy, {"SKILLQ_SECRET_PEEK_TOKEN": token,
                               "SKILLQ_SECRET_OTHER_TOKEN": other,
                               "UNRELATED_SETTING": unrelated}):
        seen = run_skill("secret-peek", vault, "--json")
        leaked = run_skill("secret-peek", vault, inputs={"leak": True})

    assert seen.code == 0, seen
    outputs = seen.json()
    assert outputs["token_ok"] is True
    env = outputs["env"]
    # Declared: there, under its upper-cased name (recorded outputs hide the value of a key
    # named like a declared secret, whatever the script put there).
    assert env["PEEK_TOKEN"] == "***"
    assert not {"OTHER_TOKEN", "UNRELATED_SETTING"} & env.keys()
    assert not [n for n in env if n.startswith("SKILLQ_SECRET_")]
    # Nothing of the worker's own environment passes through but what the protocol
    # gives. (`python3` on PATH may be a pyenv shim, which exports PYENV_* itself.)
    worker_env = {**healthy.env, "SKILLQ_DAEMON": DAEMON, "SKILLQ_SECRET_PEEK_TOKEN": token,
                  "SKILLQ_SECRET_OTHER_TOKEN": other, "UNRELATED_SETTING": unrelated}
    passed = {k for k, v in env.items() if worker_env.get(k) == v
              and not k.startswith("PYENV_")} - PROTOCOL
    assert not passed, passed
    assert not {other, unrelated, token} & set(env.values())

    assert leaked.code == 1 and leaked.run_id is not None, leaked
    assert token not in leaked.stdout + leaked.stderr
    with healthy.db() as session:
        steps = list(session.scalars(select(StepRun).where(StepRun.run_id == leaked.run_id)))
        run = session.get(PipelineRun, leaked.run_id)
        notes = list(session.scalars(select(ImprovementNote).where(
            ImprovementNote.skill == "secret-peek")))
        assert steps and run is not None and notes
        assert "***" in (steps[0].stdout_tail or "") and "***" in (steps[0].stderr_tail or "")
        records = json.dumps([[getattr(r, c.key) for c in StepRun.__table__.columns]
                              for r in steps] + [run.error, run.inputs, run.outputs]
                             + [[getattr(n, c.key) for c in ImprovementNote.__table__.columns]
                                for n in notes], default=str)
    assert token not in records
    logs = sorted((healthy.home / "logs").glob("*.log"))
    assert any(log.name == f"worker-{DAEMON}.log" for log in logs), logs
    for log in logs:  # every worker's and server's, the secret daemon's own included
        assert token not in log.read_text(errors="replace"), log
    bench = vault / "secret-peek" / "benchmarks.json"
    assert bench.exists() and token not in bench.read_text()


def test_a_missing_secret_fails_before_the_script_starts(
        healthy: Stack, run_skill: RunSkill, tmp_path: Path) -> None:
    vault = copy_vault(VAULTS / "lifecycle", tmp_path / "vault")
    marker = tmp_path / "ran"
    result = run_skill("needs-secret", vault, inputs={"marker": str(marker)})
    assert result.code == 1, result
    assert "absent_token (set SKILLQ_SECRET_ABSENT_TOKEN or `skillq secrets set " \
           "absent_token`)" in result.stderr
    assert not marker.exists()  # the script never ran
    [step] = healthy.steps(result.run_id or "")
    assert (step.error_kind, step.exit_code, step.stdout_tail) == ("missing_secret", None, None)
