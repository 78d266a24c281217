"""Running one step attempt: claim it, run it, record it. Idempotent by step-run id.

A message may arrive twice (at-least-once delivery, a redelivery after a pool child
died, the watchdog's re-dispatch): the claim, under the row's lock, decides whether
this delivery runs the step, so a step never has two successful records. Recording what
ran (and planning its run in the same transaction) is workers/step_records.py's.
"""

from __future__ import annotations

import logging
import os
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from lifecycle import launch_fence, transitions
from lifecycle.context import WorkerContext
from lifecycle.planner import locked_run
from shared import cache
from shared.attempt_id import AttemptId
from shared.builtin import RESERVED as BUILTIN
from shared.builtin import builtin_skill
from shared.db.models import PipelineRun, StepRun
from shared.db.outage import is_outage
from shared.db.session import transaction
from shared.inputs import with_defaults
from shared.plan import Plan
from shared.secrets import MissingSecret, redact, redact_value, secrets_for
from shared.skill import Skill
from shared.states import RunState, StepState
from shared.store import unpack
from shared.vault import open_skill, open_vault
from workers import attempt_end, published
from workers import sandbox as sandboxes
from workers.attempt_end import STEP_MARKER, scratch_for
from workers.attempt_end_watch import watch_cancelled
from workers.file_inputs import DatabaseFiles
from workers.heartbeat import heartbeat
from workers.proc_tags import kill_tagged
from workers.screen.executor import is_screen_step, run_screen_step
from workers.script_executor import ScriptStatus, run_script
from workers.step_records import PlanIn, finish_batch, outlasting, record_in
from workers.step_types import Claim, Result

BACKOFF_BASE_S = 1.0
AGENT_RETRIES = 3  # a model's rate limit or overload: retried like a script's exit 75
BACKOFF_CAP_S = 60.0
FLUSH_S = 0.05  # a batch records its finished items at least this often
log = logging.getLogger(__name__)


def kill_leftovers(prefix: str) -> list[int]:
    """Kill the process groups of scripts whose step-run id starts with ``prefix``
    (every attempt of one step item), found through /proc on Linux."""
    return kill_tagged(STEP_MARKER, prefix, prefix=True)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def claim_batch(ctx: WorkerContext, ids: Sequence[str], worker: str,
                on_due: Callable[[str], None]) -> list[Claim]:
    """Take the attempts of one message, in order; those another delivery owns are left.

    The common case (pending rows) is one statement for the whole batch; the rest (a
    redelivery after a crash: rows running under a dead process) go row by row. A row
    whose process died is declared lost here and ``on_due(run_id)`` called, so the planner
    sends its next attempt (whichever of this and the worker's pool-loss handler sees the
    death first records it; the other finds the attempt settled). A row its nested run
    carries is left running, and ``on_due`` is called for that nested run.
    """
    def fast() -> dict[str, Claim]:
        now = datetime.now(UTC)
        with transaction(ctx.database_url) as session:
            claimed = transitions.claim_pending(session, ids, worker=worker, pid=ctx.pid,
                                                daemon=ctx.daemon, now=now)
            jobs = {c.id: _job(ctx, session, c) for c in claimed.values()}
            _look_up_cache(session, list(jobs.values()), claimed)  # one transaction, not two
            return jobs

    # While the database is away the message stays reserved here, unacknowledged.
    taken = outlasting(ctx, fast, "claiming a step")
    for row_id in ids:
        if row_id not in taken:
            slow = outlasting(ctx, lambda: _claim_locked(ctx, row_id, worker),  # noqa: B023
                               "claiming a step")
            if isinstance(slow, Claim):
                taken[row_id] = slow
            elif slow is not None:
                on_due(slow.run_id)
        elif taken[row_id].attempt > 1:
            # An earlier attempt's script may outlive a dead worker in its own session:
            # end it before running the step again (one browser, one side effect).
            kill_leftovers(AttemptId.parse(row_id).attempts_prefix)
    return [taken[i] for i in ids if i in taken]


@dataclass(frozen=True, slots=True)
class _Due:
    """A redelivered attempt not to run here, and the run to plan for it: its own, when
    its process had died and it was declared lost (the planner sends the next attempt);
    its nested run, when that run carries it (which starts the nested run if the worker
    that created it died before its first advance, and changes nothing otherwise)."""
    run_id: str


def _claim_locked(ctx: WorkerContext, row_id: str, worker: str
                  ) -> Claim | _Due | None:
    """The slow path: decide under the row's lock whether a running row is orphaned."""
    now = datetime.now(UTC)
    with transaction(ctx.database_url) as session:
        row = session.get(StepRun, row_id, with_for_update=True)
        if row is None:
            return None
        state = StepState(row.state)
        if state == StepState.RUNNING:
            if row.child_run_id is not None:
                # Its nested run carries it and settles it when it ends: no process holds
                # it (its heartbeat is not kept), and running it again would start a
                # second nested run beside the first.
                return _Due(row.child_run_id)
            fresh = row.heartbeat_at is not None and \
                row.heartbeat_at > now - timedelta(seconds=ctx.settings.dead_after_s)
            host = (row.worker or "").rpartition("@")[2]
            same_host_dead = host == ctx.hostname and row.worker_pid is not None \
                and row.worker_pid != ctx.pid and not _pid_alive(row.worker_pid)
            if fresh and not same_host_dead:
                return None  # a live process is running it; this is a duplicate delivery
            # Not taken over: the attempt is lost, as the planner's watchdog and the
            # pool-loss handler record it, and the next one is the planner's to send
            # (one place decides retries; the records say what happened).
            why = f"process {row.worker_pid} on {host} died" if same_host_dead else \
                f"worker {row.worker} stopped sending heartbeats"
            transitions.declare_lost(row, f"{why}; re-dispatched", now)
            return _Due(row.run_id)
        if state != StepState.PENDING:
            return None  # already settled: a redelivered message after the fact
        if row.attempt > 1:
            # A dead pool process or worker leaves its script running in its own session:
            # end any earlier copy of this step item on this machine before running it
            # again (one browser, one side effect).
            kill_leftovers(AttemptId.parse(row.id).attempts_prefix)
        run = session.get(PipelineRun, row.run_id)
        if run is None or RunState(run.state).terminal:
            return None
        # the Celery worker (dom0@host), not just the machine
        transitions.take_over(row, worker=worker, pid=ctx.pid, daemon=ctx.daemon, now=now)
        plan = Plan.model_validate(run.plan)
        vault = Path(run.vault) if Path(run.vault).is_dir() else ctx.vault
        return Claim(row_id=row.id, run_id=row.run_id, step_id=row.step_id, skill=row.skill,
                     version=row.version, attempt=row.attempt,
                     inputs=unpack(session, row.inputs), workdir=plan.workdir, vault=vault,
                     source=row.source)


def _job(ctx: WorkerContext, session: Session, c: transitions.Claimed) -> Claim:
    """A claimed attempt as the runner carries it."""
    return Claim(row_id=c.id, run_id=c.run_id, step_id=c.step_id, skill=c.skill,
                 version=c.version, attempt=c.attempt, inputs=unpack(session, c.inputs),
                 workdir=c.workdir, vault=Path(c.vault) if Path(c.vault).is_dir() else ctx.vault,
                 source=c.source)


@dataclass(frozen=True, slots=True)
class _Lone:
    """A lone attempt claimed: answered from the cache in its claim's transaction
    (``result``, and ``send`` for its run's outcome), or left to run (``result`` None)."""
    job: Claim
    result: Result | None = None
    send: Callable[[], None] | None = None


class _Unseen:
    """Nothing claimed, the run's fence free and its run not there: the message came
    ahead of its launch's lock, or the launch rolled back before it came."""


def _claim_lone(ctx: WorkerContext, row_id: str, worker: str, plan_in: PlanIn
                ) -> _Lone | None:
    """Claim a lone first attempt and look up its cache entry, as ``claim_batch`` does;
    a cache hit is recorded and its run planned in that same transaction too (one
    commit from message to outcome). None: nothing claimed here (another delivery owns
    it, or its run has ended, or its launch rolled back): ``claim_batch`` decides.

    The run's row is taken with the claim, in one round trip (transitions.claim_lone),
    and only if no other transaction holds it: waiting for it while holding the
    attempt's row could deadlock with a cancel, which takes the run's row first. Held
    elsewhere, the hit is recorded as any result is (``finish_batch``). A message that
    came ahead of its launch's commit (lifecycle/launch_fence.py) waits for it in the
    claim's round trip; one that came ahead of its launch's lock finds nothing: it
    waits for the lock or the run to show and claims again."""
    run_id = AttemptId.parse(row_id).run_id
    try:
        lone = _claim_lone_once(ctx, row_id, worker, plan_in)
        if isinstance(lone, _Unseen):
            if not launch_fence.wait_seen(ctx.database_url, run_id):
                return None  # rolled back (or the sweeper's, should it commit yet)
            lone = _claim_lone_once(ctx, row_id, worker, plan_in)
    except DBAPIError as exc:
        if not launch_fence.timed_out(exc):
            raise
        log.warning("the launch of %s held its run past %.0fs: left to the sweeper",
                    row_id, launch_fence.WAIT_S)
        return None
    return lone if isinstance(lone, _Lone) else None


def _claim_lone_once(ctx: WorkerContext, row_id: str, worker: str, plan_in: PlanIn
                     ) -> _Lone | _Unseen | None:
    with transaction(ctx.database_url) as session:
        lone = transitions.claim_lone(session, row_id, worker=worker, pid=ctx.pid,
                                      daemon=ctx.daemon)
        c, locked = lone.claimed, lone.run
        if c is None:
            # Unknown once its launch let go of the fence: that launch rolled back.
            return _Unseen() if lone.fence_free and not lone.run_known else None
        job = _job(ctx, session, c)
        _look_up_cache(session, [job], {c.id: c})
        result = _cache_hit(ctx, job)
        run = locked_run(session, locked) if result is not None and locked else None
        if result is None or run is None:
            return _Lone(job)
        due, _ = record_in(session, ctx, [(job, result)], claimed_at=c.started_at)
        return _Lone(job, result, plan_in(session, run) if job.run_id in due else None)


def _backoff_s(attempt: int) -> float:
    """Exponential with full jitter around it, so retries of many items spread out."""
    base = min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2 ** (attempt - 1))
    return float(base * random.uniform(0.5, 1.5))  # noqa: S311 - jitter, not security


def _skill_for(ctx: WorkerContext, job: Claim) -> Skill | Result:
    """The skill the attempt runs, or the failure that says why there is none."""
    skill = builtin_skill(job.skill) or open_skill(job.vault, job.skill) or open_vault(
        job.vault, ttl_s=ctx.settings.discovery_ttl_s).skills.get(job.skill)
    if skill is None:
        return Result(StepState.FAILED, error=f"skill '{job.skill}' is not in this worker's "
                      f"vault {job.vault}", error_kind="missing_skill")
    # The published files, verified, or the version the run wants rebuilt from the store
    # (so what runs is always job.version, or the step fails here).
    try:
        return published.skill_for_step(ctx, job, skill)
    except published.REFUSED as exc:
        return Result(StepState.FAILED, error=str(exc), error_kind=exc.error_kind)


def _cache_hit(ctx: WorkerContext, job: Claim) -> Result | None:
    """What ``execute`` would answer from ``job.cached`` without running anything, or
    None when it would do anything else (run a script, start a run, fail)."""
    if not job.cached:
        return None
    skill = _skill_for(ctx, job)
    if isinstance(skill, Result) or skill.manifest.is_orchestrator \
            or skill.manifest.kind == "instructions" or not skill.manifest.cache.enabled:
        return None
    try:
        secrets_for(skill.manifest.auth)
    except MissingSecret:
        return None
    key = cache.cache_key(skill.name, skill.manifest.version,
                          with_defaults(skill.manifest, job.inputs))
    if key not in job.cached:
        return None
    return Result(StepState.SUCCEEDED, outputs=job.cached[key], cache_hit=True,
                  duration_ms=0.0)


def execute(ctx: WorkerContext, job: Claim, cached: Mapping[str, Any] | None = None
            ) -> Result:
    """Run one claimed attempt. ``cached``: the batch's cache entries by key, when they
    were looked up together (else this looks its own up)."""
    skill = _skill_for(ctx, job)
    if isinstance(skill, Result):
        return skill
    if skill.manifest.is_orchestrator:
        return _start_child(ctx, job, skill)
    if skill.manifest.kind == "instructions":
        return _agent_step(ctx, job, skill)
    try:
        secrets = secrets_for(skill.manifest.auth)
    except MissingSecret as exc:
        return Result(StepState.FAILED, error=str(exc), error_kind="missing_secret")
    inputs = with_defaults(skill.manifest, job.inputs)
    key = cache.cache_key(skill.name, skill.manifest.version, inputs)
    if skill.manifest.cache.enabled:
        if cached is not None:  # looked up for the whole batch at once
            if key in cached:
                return Result(StepState.SUCCEEDED, outputs=cached[key], cache_hit=True,
                              duration_ms=0.0)
        else:
            with transaction(ctx.database_url) as session:
                hit = cache.lookup(session, key)
                if hit is not None:
                    return Result(StepState.SUCCEEDED, outputs=hit.outputs, cache_hit=True,
                                  duration_ms=0.0)
    workdir = Path(job.workdir) if job.workdir and Path(job.workdir).is_dir() else None
    screen = None
    try:
        if is_screen_step(skill.manifest):  # dom0/cmd0: one at a time per machine
            screen = run_screen_step(skill.folder, skill.manifest, inputs,
                                     settings=ctx.settings, database_url=ctx.database_url,
                                     secrets=secrets, workdir=workdir,
                                     extra_env={STEP_MARKER: job.row_id},
                                     scratch=scratch_for(job.row_id),
                                     sandbox=sandboxes.current(ctx.settings))
            done = screen.done
        else:
            assert skill.manifest.run is not None
            done = run_script(skill.folder, skill.manifest, inputs, secrets=secrets,
                              timeout_s=skill.manifest.run.timeout,
                              max_output_bytes=ctx.settings.max_output_bytes, workdir=workdir,
                              extra_env={STEP_MARKER: job.row_id},
                              scratch=scratch_for(job.row_id),
                              sandbox=sandboxes.current(ctx.settings),
                              files=DatabaseFiles(ctx.database_url,
                                                  ctx.settings.file_max_bytes))
    finally:
        attempt_end.end(job.row_id)  # nothing the attempt started outlives it
    result = Result(StepState.SUCCEEDED, exit_code=done.exit_code,
                    stdout_tail=redact(done.stdout_tail, secrets),
                    stderr_tail=redact(done.stderr_tail, secrets),
                    duration_ms=float(done.duration_ms), screen=screen)
    if done.status == ScriptStatus.SUCCESS:
        # A secret a script echoes into its outputs must not reach the records either.
        result.outputs = redact_value(done.outputs, secrets) if secrets else done.outputs
        if skill.manifest.cache.enabled:
            result.extra["cache"] = (key, skill.manifest.cache.ttl)
        return result
    result.error = redact(done.error or done.status.value, secrets)
    retries = skill.manifest.run.retries if skill.manifest.run else 0  # actions: none
    if done.status == ScriptStatus.TRANSIENT and job.attempt <= retries:
        result.state = StepState.RETRYING
        result.error_kind = "transient"
        result.not_before = datetime.now(UTC) + timedelta(seconds=_backoff_s(job.attempt))
        return result
    result.state = StepState.FAILED
    result.error_kind = {ScriptStatus.TRANSIENT: "transient_exhausted"}.get(
        done.status, done.status.value)
    return result


def _agent_step(ctx: WorkerContext, job: Claim, skill: Skill) -> Result:
    """An instruction-only skill, run by a model (workers/agent/; imported here, so only
    the processes that run agent steps load the model runtime)."""
    from workers.agent.step import run_step

    try:
        secrets = secrets_for(skill.manifest.auth)
    except MissingSecret as exc:
        return Result(StepState.FAILED, error=str(exc), error_kind="missing_secret")
    done = run_step(ctx, row_id=job.row_id, attempt=job.attempt, vault_root=job.vault,
                    workdir=job.workdir, skill=skill,
                    inputs=with_defaults(skill.manifest, job.inputs), secrets=secrets,
                    worker=ctx.hostname)
    state = StepState.WAITING if done.waiting_on else \
        StepState.SUCCEEDED if done.ok else StepState.FAILED
    result = Result(state, outputs=done.outputs, error=done.error,
                    error_kind=done.error_kind, cost_usd=done.cost_usd,
                    tokens_in=done.tokens_in, tokens_out=done.tokens_out,
                    # what the prompt left out to fit its budgets: on record, never silent
                    stderr_tail="\n".join(f"warning: {w}" for w in done.warnings) or None,
                    extra={"waiting_on": done.waiting_on})
    if done.transient and job.attempt <= AGENT_RETRIES:
        result.state = StepState.RETRYING
        result.not_before = datetime.now(UTC) + timedelta(seconds=_backoff_s(job.attempt))
    return result


def _start_child(ctx: WorkerContext, job: Claim, skill: Skill) -> Result:
    from lifecycle.submit import create_run  # control plane: a nested pipeline run

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


def _look_up_cache(session: Session, jobs: Sequence[Claim],
                   claimed: Mapping[str, transitions.Claimed]) -> None:
    """Set ``cached`` on the jobs whose skill caches: from what their claim found under
    the key of their stored inputs when that is the key ``execute`` would use (the usual
    case: no default added), else from one query for the rest.

    Keyed as ``execute`` keys them, from the vault's copy of the skill; a job whose
    vault copy is missing or of another version than the run's, or whose skill is a
    built-in, is left to ``execute`` (None), which looks its entry up for the skill it
    runs."""
    asked: dict[str, str] = {}  # by row id, the key of those their claim could not answer
    for job in jobs:
        # A built-in skill goes before the vault's (``_skill_for``): execute keys it.
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


def run_batch(ctx: WorkerContext, ids: Sequence[str], worker: str,
              on_due: Callable[[str], None], plan_in: PlanIn | None = None) -> list[Result]:
    """Claim, run and record one message's attempts; ``on_due(run_id)`` for each run the
    planner should look at, as soon as it is known (``plan_in``: how a lone attempt's run
    is planned with its record, see ``finish_batch``). The results of the attempts this
    delivery ran (none: another delivery owns them, or their run has ended)."""
    jobs: list[Claim] | None = None
    if plan_in is not None and len(ids) == 1 and launch_fence.is_lone_first(ids[0]):
        try:
            lone = outlasting(ctx, lambda: _claim_lone(ctx, ids[0], worker, plan_in),
                               "claiming a step")
        except Exception as exc:
            if is_outage(exc):
                raise
            # Rolled back whole: nothing claimed, so the usual claim takes it, once the
            # run's launch has committed (that claim does not look at its fence).
            log.exception("claiming %s with its run failed; claiming it alone", ids[0])
            run_id = AttemptId.parse(ids[0]).run_id
            outlasting(ctx, lambda: launch_fence.wait_open(ctx.database_url, run_id),
                       "claiming a step")
            lone = None
        if lone is not None and lone.result is not None:
            if lone.send is not None:
                lone.send()
            return [lone.result]
        jobs = [lone.job] if lone is not None else None
    if jobs is None:
        jobs = claim_batch(ctx, ids, worker, on_due)
    states: list[Result] = []
    open_ids = {j.row_id for j in jobs}
    pending: list[tuple[Claim, Result]] = []

    def flush() -> None:
        for run_id in sorted(finish_batch(ctx, pending, plan_in)):
            on_due(run_id)
        for job, _ in pending:
            open_ids.discard(job.row_id)
        pending.clear()

    with heartbeat(ctx.database_url, open_ids, ctx.settings.heartbeat_s), \
            watch_cancelled(ctx.database_url, open_ids) as cancelled:
        flushed = time.monotonic()
        for job in jobs:
            if job.row_id in cancelled:  # its run was cancelled before it started
                open_ids.discard(job.row_id)
                continue
            try:
                result = execute(ctx, job, job.cached)
            except Exception as exc:  # an executor bug still settles the step, with why
                result = Result(StepState.FAILED,
                                error=f"internal error: {type(exc).__name__}: {exc}",
                                error_kind="internal")
            if job.row_id in cancelled:  # stopped: the cancellation is its record
                open_ids.discard(job.row_id)
                continue
            pending.append((job, result))
            states.append(result)
            if time.monotonic() - flushed >= FLUSH_S:
                flush()
                flushed = time.monotonic()
        if pending:
            flush()
    return states
