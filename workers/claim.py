"""Claiming the attempts of one step message: which of them this delivery runs.

A message may arrive twice (at-least-once delivery, a redelivery after a pool process
died, the watchdog's re-dispatch): the claim, under each row's lock, decides whether this
delivery runs an attempt, so a step never has two successful records. ``claim`` is the
one entry: its outcome is the attempts to run here (``Claimed``), or, for a lone first
attempt the cache answers, that attempt already recorded with its claim (``Answered``).

Inside, three ways, from the quickest:
- a lone first attempt (one item, attempt 1: launch_fence.is_lone_first) is claimed
  with its run's row and its cache entry in one round trip, and a cache hit recorded and
  its run planned in that same transaction (one commit from message to outcome);
- pending rows are claimed in one statement for the whole message;
- a row that is running already (a redelivery after a crash) is decided row by row,
  under its lock: a live process keeps it, a dead one's attempt is declared lost.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from lifecycle import launch_fence, transitions
from lifecycle.context import WorkerContext
from lifecycle.planner import locked_run
from shared.attempt_id import AttemptId
from shared.db.models import PipelineRun, StepRun
from shared.db.outage import is_outage
from shared.db.session import transaction
from shared.plan import Plan
from shared.states import RunState, StepState
from shared.store import unpack
from workers.attempt_end import STEP_MARKER
from workers.attempt_skill import skill_for
from workers.claim_cache import look_up_cache
from workers.executors.registry import executor_for
from workers.proc_tags import kill_tagged
from workers.step_records import PlanIn, outlasting, record_in
from workers.step_types import Claim, Result

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Claimed:
    """The attempts this delivery runs, in the message's order (none: another delivery
    owns them, or their run has ended)."""
    jobs: list[Claim]


@dataclass(frozen=True, slots=True)
class Answered:
    """A lone attempt the cache answered, recorded in its claim's transaction; ``send``
    sends its run's planned outcome (None: its run is planned as any run is)."""
    result: Result
    send: Callable[[], None] | None


def claim(ctx: WorkerContext, ids: Sequence[str], worker: str,
          on_due: Callable[[str], None], plan_in: PlanIn | None = None
          ) -> Claimed | Answered:
    """Take the attempts of one message. ``on_due(run_id)``: a run the planner should
    look at now (a lost attempt's, a nested run that carries one); ``plan_in``: how a
    lone attempt's run is planned with its record (step_records.finish_batch)."""
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
            return Answered(lone.result, lone.send)
        if lone is not None:
            return Claimed([lone.job])
    return Claimed(_claim_batch(ctx, ids, worker, on_due))


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


def _claim_batch(ctx: WorkerContext, ids: Sequence[str], worker: str,
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
            look_up_cache(session, list(jobs.values()), claimed)  # one transaction, not two
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
    """Claim a lone first attempt and look up its cache entry, as ``_claim_batch`` does;
    a cache hit is recorded and its run planned in that same transaction too (one
    commit from message to outcome). None: nothing claimed here (another delivery owns
    it, or its run has ended, or its launch rolled back): ``_claim_batch`` decides.

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
        look_up_cache(session, [job], {c.id: c})
        result = _answer_from_cache(ctx, job)
        run = locked_run(session, locked) if result is not None and locked else None
        if result is None or run is None:
            return _Lone(job)
        due, _ = record_in(session, ctx, [(job, result)], claimed_at=c.started_at)
        return _Lone(job, result, plan_in(session, run) if job.run_id in due else None)


def _answer_from_cache(ctx: WorkerContext, job: Claim) -> Result | None:
    """What running the attempt would answer from ``job.cached`` without running
    anything (its kind's executor says), or None when it would do anything else."""
    if not job.cached:
        return None
    skill = skill_for(ctx, job)
    if isinstance(skill, Result):
        return None
    return executor_for(skill.manifest).answer_from_cache(ctx, job, skill)
