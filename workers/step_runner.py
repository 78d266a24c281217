"""Running one step attempt: claim it, run it, record it. Idempotent by step-run id.

A message may arrive twice (at-least-once delivery, a redelivery after a pool child
died, the watchdog's re-dispatch): the claim, under the row's lock, decides whether
this delivery runs the step, so a step never has two successful records.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import func, select

from shared import cache
from shared.db.models import PipelineRun, StepRun
from shared.db.session import transaction
from shared.inputs import with_defaults
from shared.plan import Plan
from shared.secrets import MissingSecret, redact, secrets_for
from shared.skill import Skill
from shared.states import StepState, check_step
from shared.store import pack, unpack
from shared.vault import open_vault
from workers.context import WorkerContext
from workers.heartbeat import heartbeat
from workers.script_executor import ScriptStatus, run_script

BACKOFF_BASE_S = 1.0
STEP_MARKER = "SKILLQ_STEP_RUN"  # in each script's environment: finds it after a crash
BACKOFF_CAP_S = 60.0


@dataclass
class Claim:
    row_id: str
    run_id: str
    step_id: str
    skill: str
    version: int
    attempt: int
    inputs: dict[str, Any]
    workdir: str | None
    vault: Path  # the run's vault when this machine has it, else the worker's own


@dataclass
class Result:
    state: StepState
    outputs: Any = None
    error: str | None = None
    error_kind: str | None = None
    cache_hit: bool = False
    exit_code: int | None = None
    stdout_tail: str | None = None
    stderr_tail: str | None = None
    duration_ms: float | None = None
    not_before: datetime | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def kill_leftovers(prefix: str) -> list[int]:
    """Kill the process groups of scripts whose step-run id starts with ``prefix``
    (every attempt of one step item), found through /proc on Linux."""
    marker = f"{STEP_MARKER}={prefix}".encode()
    killed = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if any(var.startswith(marker) for var in environ.split(b"\0")):
            pid = int(entry.name)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(os.getpgid(pid), signal.SIGKILL)
                killed.append(pid)
    return killed


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def claim(ctx: WorkerContext, row_id: str, worker: str) -> Claim | None:
    """Take the step for this delivery, or None when another delivery owns it."""
    now = datetime.now(UTC)
    with transaction(ctx.database_url) as session:
        row = session.get(StepRun, row_id, with_for_update=True)
        if row is None:
            return None
        state = StepState(row.state)
        if state == StepState.RUNNING:
            fresh = row.heartbeat_at is not None and \
                row.heartbeat_at > now - timedelta(seconds=ctx.settings.dead_after_s)
            host = (row.worker or "").rpartition("@")[2]
            same_host_dead = host == ctx.hostname and row.worker_pid is not None \
                and row.worker_pid != ctx.pid and not _pid_alive(row.worker_pid)
            if fresh and not same_host_dead:
                return None  # a live process is running it; this is a duplicate delivery

        elif state != StepState.PENDING:
            return None  # already settled: a redelivered message after the fact
        if row.attempt > 1 or state == StepState.RUNNING:
            # A dead pool process or worker leaves its script running in its own session:
            # end any earlier copy of this step item on this machine before running it
            # again (one browser, one side effect).
            kill_leftovers(row.id.rsplit("/", 1)[0] + "/")
        check_step(state, StepState.RUNNING)
        run = session.get(PipelineRun, row.run_id)
        if run is None or run.state in ("failed", "cancelled"):
            return None
        row.state = StepState.RUNNING
        row.worker = worker  # the Celery worker (dom0@host), not just the machine
        row.worker_pid = ctx.pid
        row.started_at = now
        row.heartbeat_at = now
        plan = Plan.model_validate(run.plan)
        vault = Path(run.vault) if Path(run.vault).is_dir() else ctx.vault
        return Claim(row_id=row.id, run_id=row.run_id, step_id=row.step_id, skill=row.skill,
                     version=row.version, attempt=row.attempt,
                     inputs=unpack(session, row.inputs), workdir=plan.workdir, vault=vault)


def _backoff_s(attempt: int) -> float:
    """Exponential with full jitter around it, so retries of many items spread out."""
    base = min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2 ** (attempt - 1))
    return float(base * random.uniform(0.5, 1.5))  # noqa: S311 - jitter, not security


def execute(ctx: WorkerContext, job: Claim) -> Result:
    vault = open_vault(job.vault, ttl_s=ctx.settings.discovery_ttl_s)
    skill = vault.skills.get(job.skill)
    if skill is None:
        return Result(StepState.FAILED, error=f"skill '{job.skill}' is not in this worker's "
                      f"vault {job.vault}", error_kind="missing_skill")
    if skill.manifest.version != job.version:
        return Result(StepState.FAILED, error=f"this worker's vault has {job.skill} "
                      f"v{skill.manifest.version}, the run wants v{job.version}",
                      error_kind="version_mismatch")
    if skill.manifest.is_orchestrator:
        return _start_child(ctx, job, skill)
    if skill.manifest.run is None:
        return Result(StepState.FAILED, error=f"{job.skill} is an instruction-only skill; "
                      "this deployment has no agent executor to run it", error_kind="no_executor")
    try:
        secrets = secrets_for(skill.manifest.auth)
    except MissingSecret as exc:
        return Result(StepState.FAILED, error=str(exc), error_kind="missing_secret")
    inputs = with_defaults(skill.manifest, job.inputs)
    key = cache.cache_key(skill.name, skill.manifest.version, inputs)
    if skill.manifest.cache.enabled:
        with transaction(ctx.database_url) as session:
            hit = cache.lookup(session, key)
            if hit is not None:
                return Result(StepState.SUCCEEDED, outputs=hit.outputs, cache_hit=True,
                              duration_ms=0.0)
    workdir = Path(job.workdir) if job.workdir and Path(job.workdir).is_dir() else None
    with heartbeat(ctx.database_url, job.row_id, ctx.settings.heartbeat_s):
        done = run_script(skill.folder, skill.manifest, inputs, secrets=secrets,
                          timeout_s=skill.manifest.run.timeout,
                          max_output_bytes=ctx.settings.max_output_bytes, workdir=workdir,
                          extra_env={STEP_MARKER: job.row_id})
    result = Result(StepState.SUCCEEDED, exit_code=done.exit_code,
                    stdout_tail=redact(done.stdout_tail, secrets),
                    stderr_tail=redact(done.stderr_tail, secrets),
                    duration_ms=float(done.duration_ms))
    if done.status == ScriptStatus.SUCCESS:
        result.outputs = done.outputs
        if skill.manifest.cache.enabled:
            result.extra["cache"] = (key, skill.manifest.cache.ttl)
        return result
    result.error = redact(done.error or done.status.value, secrets)
    if done.status == ScriptStatus.TRANSIENT and job.attempt <= skill.manifest.run.retries:
        result.state = StepState.RETRYING
        result.error_kind = "transient"
        result.not_before = datetime.now(UTC) + timedelta(seconds=_backoff_s(job.attempt))
        return result
    result.state = StepState.FAILED
    result.error_kind = {ScriptStatus.TRANSIENT: "transient_exhausted"}.get(
        done.status, done.status.value)
    return result


def _start_child(ctx: WorkerContext, job: Claim, skill: Skill) -> Result:
    from orchestrator.submit import create_run  # control plane: a nested pipeline run

    with transaction(ctx.database_url) as session:
        row = session.get(StepRun, job.row_id, with_for_update=True)
        parent = session.get(PipelineRun, job.run_id)
        assert row is not None and parent is not None
        vault = open_vault(job.vault, ttl_s=ctx.settings.discovery_ttl_s)
        child = create_run(session, vault, skill, job.inputs, source=parent.source,
                           triggered_by=parent.skill, parent_step_run_id=row.id,
                           workdir=job.workdir)
        row.child_run_id = child
    return Result(StepState.RUNNING, extra={"child_run_id": child})


def finish(ctx: WorkerContext, job: Claim, result: Result) -> bool:
    """Record the attempt; True when the planner should look at the run now."""
    if result.state == StepState.RUNNING:  # a nested run settles this step later
        return True
    now = datetime.now(UTC)
    with transaction(ctx.database_url) as session:
        row = session.get(StepRun, job.row_id, with_for_update=True)
        if row is None or row.state != StepState.RUNNING or row.worker_pid != ctx.pid:
            return False  # re-dispatched meanwhile (declared lost): the new attempt counts
        check_step(StepState.RUNNING, result.state)
        row.state = result.state
        row.outputs = pack(session, result.outputs, ctx.settings.inline_output_bytes) \
            if result.outputs is not None else None
        row.error = result.error
        row.error_kind = result.error_kind
        row.cache_hit = result.cache_hit
        row.exit_code = result.exit_code
        row.stdout_tail = result.stdout_tail
        row.stderr_tail = result.stderr_tail
        row.finished_at = now
        row.duration_ms = result.duration_ms if result.duration_ms is not None else \
            (now - (row.started_at or now)).total_seconds() * 1000
        row.not_before = result.not_before
        if "cache" in result.extra and result.outputs is not None:
            key, ttl = result.extra["cache"]
            cache.store(session, key=key, skill=row.skill, version=row.version,
                        outputs=result.outputs, ttl_s=ttl, step_run_id=row.id)
    if result.state != StepState.SUCCEEDED:
        return True
    with transaction(ctx.database_url) as session:
        open_items = session.scalar(select(func.count()).select_from(StepRun).where(
            StepRun.run_id == job.run_id, StepRun.step_id == job.step_id,
            StepRun.state.in_([StepState.PENDING.value, StepState.RUNNING.value])))
    # Counted after our commit: whichever item of a fan-out finishes last sees zero.
    return not open_items
