"""Moving pipeline runs forward: the control-plane tasks and the in-process call.

A worker that records the last item of a step moves the run on itself (``advance_run``),
sparing a broker round trip; the ``skillq.advance`` task does the same for those who
cannot (a nested run's parent, a client), and ``skillq.watch`` is the watchdog.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from celery import Celery, Task, shared_task
from sqlalchemy import select
from sqlalchemy.orm import Session

from lifecycle import canvas, launch_fence, run_end_notice, transitions
from lifecycle.context import WorkerContext, current
from lifecycle.dispatch import Dispatch
from lifecycle.planner import Outcome
from lifecycle.planner import advance as plan_advance
from lifecycle.recording import files_due, write_files
from lifecycle.routing import OnlineDaemon
from lifecycle.run_end import finish_parent
from shared.db.models import PipelineRun, StepRun
from shared.db.outage import through_outage
from shared.db.session import transaction
from shared.errors import RunNotFound
from shared.states import RunState, StepState

log = logging.getLogger(__name__)


def advance_run(app: Celery, ctx: WorkerContext, run_id: str) -> None:
    def plan() -> Outcome:
        with transaction(ctx.database_url) as session:
            return advance_in(session, ctx, run_id)

    # Planning is idempotent, so a pass cut off by a database outage is simply done again.
    out = through_outage(plan, limit_s=ctx.settings.database_outage_s, what="planning a run")
    send_outcome(app, ctx, run_id, out)


def advance_in(session: Session, ctx: WorkerContext, run_id: str, *,
               locked: PipelineRun | None = None,
               daemons: list[OnlineDaemon] | None = None) -> Outcome:
    """Plan in the caller's transaction; the caller commits, then ``send_outcome``.
    ``locked``: the run's row, as planner.lock_run gave it in this transaction;
    ``daemons``: the online daemons, as the caller has just read them."""
    out = plan_advance(session, run_id, ctx.settings, locked=locked, daemons=daemons)
    if out.settled_skills or out.finished:
        run = session.get(PipelineRun, run_id)
        if run is not None:
            # benchmarks.json windows: once per settled step and finished run, not per
            # item, so a 5,000-item fan-out rewrites each file once; after the commit.
            out.files = files_due(ctx, run, out.settled_skills, pipeline=out.finished)
    if out.finished:
        run_end_notice.announce(session, run_id)
    return out


@dataclass(frozen=True, slots=True)
class Cancelled:
    run_id: str
    state: str  # the run's state now: cancelled, or how it had ended before
    stopped: tuple[str, ...] = ()  # attempts that were running: their workers end them
    ended_now: bool = False  # False: it had ended before (left as it ended)


def cancel_in(session: Session, ctx: WorkerContext, run_id: str, reason: str
              ) -> tuple[Cancelled, Outcome]:
    """Cancel a run in the caller's transaction (commit, then ``send_outcome``): its
    pending attempts never start (a message for one is a no-op: the claim refuses an
    ended run), its running ones are recorded cancelled and their workers stop their
    processes (workers/attempt_end_watch.py), its nested runs are cancelled too, and
    benchmarks.json shows it. A run that had ended is left as it ended."""
    run = session.get(PipelineRun, run_id, with_for_update=True)
    if run is None:
        raise RunNotFound(run_id)
    if RunState(run.state).terminal:
        return Cancelled(run_id, run.state), Outcome()
    stopped = transitions.cancel_run(session, run_id, reason)
    out = Outcome(finished=True)
    # A nested run cancelled by itself fails the step that started it.
    parent = finish_parent(session, run)
    if parent is not None:
        out.advance_runs.append(parent)
    # The windows of the skills it stopped (nested runs' steps too), and its own.
    skills = set(session.scalars(select(StepRun.skill).where(
        StepRun.id.in_(stopped))).all()) if stopped else set()
    out.files = files_due(ctx, run, skills, pipeline=True)
    run_end_notice.announce(session, run_id)
    return Cancelled(run_id, run.state, tuple(stopped), ended_now=True), out


def cancel(app: Celery, ctx: WorkerContext, run_id: str, reason: str) -> Cancelled:
    with transaction(ctx.database_url) as session:
        done, out = cancel_in(session, ctx, run_id, reason)
    send_outcome(app, ctx, run_id, out)
    return done


def send_ahead(app: Celery, session: Session, run_id: str, out: Outcome) -> Outcome:
    """Before a launch's commit: its message, when it is one lone first attempt, sent
    behind the run's fence (lifecycle/launch_fence.py), so that the commit overlaps its
    way to the worker; what is left for ``send_outcome`` after the commit. A send that
    fails here is left to it too, which tries again and raises as after any commit."""
    if not launch_fence.goes_ahead(out.dispatch):
        return out
    with launch_fence.hold(session, run_id):
        try:
            canvas.dispatch_steps(app, out.dispatch)
        except Exception as exc:
            log.warning("sending %s's first step before its commit failed (%s); "
                        "sending it after", run_id, exc)
            return out
    return replace(out, dispatch=[])


def send_outcome(app: Celery, ctx: WorkerContext, run_id: str, out: Outcome) -> None:
    """After the commit, so a worker never looks for a step row that is not there yet
    (but a launch's ``send_ahead``, whose claim waits for the commit): the next
    steps' messages, the parents' planning, the watchdog, then the benchmarks.json
    windows (last, and even when a send failed: the record they show is committed)."""
    try:
        canvas.dispatch_steps(app, out.dispatch)
        for parent in out.advance_runs:
            advance_run(app, ctx, parent)
        if out.watch_in_s is not None:
            canvas.schedule_watch(app, run_id, out.watch_in_s)
    finally:
        if out.files is not None:
            write_files(ctx, out.files)


@shared_task(name=canvas.ADVANCE, bind=True, acks_late=True, ignore_result=True)
def advance(self: Task[Any, Any], run_id: str) -> None:
    advance_run(self.app, current(), run_id)


@shared_task(name=canvas.WATCH, bind=True, acks_late=True, ignore_result=True)
def watch(self: Task[Any, Any], run_id: str) -> None:
    """The watchdog: with no step reporting, a dead worker is still noticed."""
    ctx = current()
    with transaction(ctx.database_url) as session:
        run = session.get(PipelineRun, run_id, with_for_update=True)
        if run is None or RunState(run.state).terminal:
            return  # a finished run's record stays as it finished
        run.watch_at = None  # this watch has fired; advance schedules the next
    advance_run(self.app, ctx, run_id)
    resend_stranded(self.app, ctx, run_id)


def resend_stranded(app: Celery, ctx: WorkerContext, run_id: str) -> list[str]:
    """Send again the attempts left pending with no message in their queue.

    A worker that dies holding messages it reserved but never started takes them along
    until the broker's visibility timeout (hours on Redis); their rows stay pending. An
    attempt pending longer than SKILLQ_DEAD_AFTER_S whose queue is empty has no message
    left to wait for: it is sent again (a duplicate is harmless: the claim is
    idempotent, and a claimed or settled attempt is not pending).
    """
    cutoff = datetime.now(UTC) - timedelta(seconds=ctx.settings.dead_after_s)
    with transaction(ctx.database_url) as session:
        rows = session.execute(select(StepRun.id, StepRun.queue, StepRun.skill).where(
            StepRun.run_id == run_id, StepRun.state == StepState.PENDING.value,
            StepRun.not_before.is_(None), StepRun.created_at < cutoff)).all()
    stranded: dict[str, list[tuple[str, str]]] = {}
    for row_id, queue, skill in rows:
        stranded.setdefault(queue, []).append((row_id, skill))
    sent = []
    for queue, ids in stranded.items():
        if canvas.queue_depth(app, queue) == 0:
            log.warning("run %s: %d attempt(s) pending with no message in %s; sending again",
                        run_id, len(ids), queue)
            canvas.dispatch_steps(app, [Dispatch((i,), queue, skill) for i, skill in ids])
            sent += [i for i, _ in ids]
    return sent
