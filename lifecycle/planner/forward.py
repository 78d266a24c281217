"""One advance: revive, then move the steps forward (settle the running ones, launch the
ready ones) until nothing changes, then end the run or arm its watchdog."""

from __future__ import annotations

from sqlalchemy.orm import Session

from lifecycle import step_counts, transitions
from lifecycle.planner import decisions, records
from lifecycle.planner.launch import ItemError, launch
from lifecycle.planner.revive import revive
from lifecycle.planner.values import run_outputs
from lifecycle.planner.work import Outcome, Work, now_utc
from lifecycle.routing import OnlineDaemon
from lifecycle.run_end import count_run, finish_parent
from shared.db.models import PipelineRun
from shared.plan import PlanStep
from shared.resolve import ResolveError
from shared.settings import Settings
from shared.states import REJECTED_KIND, RunState, StepProgress
from shared.store import pack


def advance(session: Session, run_id: str, settings: Settings, *,
            locked: PipelineRun | None = None,
            daemons: list[OnlineDaemon] | None = None) -> Outcome:
    """``locked``: the run, as ``lock_run`` gave it earlier in this transaction;
    ``daemons``: the online daemons to route by, as the caller has just read them."""
    run = locked if locked is not None else records.lock_run(session, run_id)
    if run is None or RunState(run.state).terminal:
        return Outcome()  # ended before: a late nudge changes nothing
    if run.state == RunState.PENDING:
        transitions.start_run(run)
    work = Work(session, run, settings, daemons)
    revive(work)
    if not work.out.finished:
        _step_forward(work)
    run.progress = work.progress.steps
    if work.out.finished:
        run.watch_at = None  # nothing left to watch
        parent = finish_parent(session, run)
        if parent is not None:
            work.out.advance_runs.append(parent)
    else:
        now = now_utc()
        wanted = decisions.watch_at(now, settings.dead_after_s, work.next_due, run.watch_at)
        if wanted is not None:
            run.watch_at = wanted
            work.out.watch_in_s = (wanted - now).total_seconds()
    return work.out


def _step_forward(work: Work) -> None:
    progress = work.progress
    changed = True
    while changed and not work.out.finished:
        changed = False
        for step in work.plan.steps:
            state = progress.state(step.id)
            if state is StepProgress.RUNNING:
                if not _settle(work, step):
                    return
                changed |= progress.state(step.id) is StepProgress.DONE
            elif progress.ready(step):
                try:
                    nothing_to_run = launch(work, step)
                except ItemError as exc:
                    work.fail(step.id, exc.index, exc.message)
                    return
                except ResolveError as exc:
                    work.fail(step.id, None, str(exc))
                    return
                changed |= nothing_to_run
    if progress.all_done(work.plan):
        _succeed(work)


def _settle(work: Work, step: PlanStep) -> bool:
    """Mark a running step done when every item is final; False if the run failed.

    After revive(), an item whose newest attempt is not final has one pending,
    running or waiting (a retrying or lost attempt has its next one, or the run
    failed), so "every item final" is "no attempt open": one index probe."""
    if step.id in work.open_steps:
        return True
    if step.id in work.lone:  # its one item succeeded here
        work.progress.finish(step.id)
        work.out.settled_skills.add(step.skill)
        return True
    if step_counts.any_open(work.session, work.run.id, step.id):
        work.open_steps.add(step.id)
        return True
    failed, first = step_counts.failed_items(work.session, work.run.id, step.id)
    if first is not None:
        settled = decisions.settle(step, work.progress.items(step.id), failed, first.error)
        if settled.error is not None:
            work.out.settled_skills.add(step.skill)
            work.fail(step.id, first.item_index, settled.error,
                      rejected=first.error_kind == REJECTED_KIND)
            return False
        if settled.skip:
            transitions.skip_failed_items(work.session, work.run.id, step.id)
    work.progress.finish(step.id)
    work.out.settled_skills.add(step.skill)
    return True


def _succeed(work: Work) -> None:
    run = work.run
    try:
        outputs = run_outputs(work)
    except ResolveError as exc:
        work.fail("outputs", None, str(exc))
        return
    transitions.succeed_run(run, pack(work.session, outputs,
                                      work.settings.inline_output_bytes))
    work.out.finished = True
    # Not flushed first: the counts read only attempts' costs, which this advance
    # leaves as they were, and the run's row goes in one UPDATE with its progress.
    with work.session.no_autoflush:
        count_run(work.session, run, work.plan)
