"""Reviving: an advance's first pass over its running steps. It sends the next attempt
of what failed for a passing reason, sends a retry that fell due, declares lost a
running attempt whose heartbeat stopped, and re-dispatches what a dead worker held, or
gives the item up, as lifecycle/policy.py's rules say."""

from __future__ import annotations

from datetime import datetime, timedelta

from lifecycle import policy, step_counts, transitions, waits
from lifecycle.planner import records
from lifecycle.planner.launch import route_step, send_when_due
from lifecycle.planner.work import Work
from shared.db.models import StepRun
from shared.notes import note_lost_step
from shared.resolve import ResolveError
from shared.states import StepState


def revive(work: Work) -> None:
    """Close the waits past their deadline; retry what failed transiently; re-dispatch
    what a dead worker held.

    Reads first (the rows, their items' losses), then changes: no query in the loop,
    so a thousand items of a dead worker's batches cost one flush, not a thousand."""
    # A step whose only item just succeeded here has nothing to revive.
    steps = [s for s in work.progress.running(work.plan) if s not in work.lone]
    if not steps:
        return
    _expire_waits(work, steps)
    now = work.now
    dead_before = now - timedelta(seconds=work.settings.dead_after_s)
    wanting = step_counts.wanting(work.session, work.run.id, steps, dead_before)
    lost = step_counts.losses(work.session, work.run.id, wanting)
    for row in wanting:
        if work.out.finished:
            return
        losses = lost.get((row.step_id, row.item_index), 0)
        if row.state == StepState.RETRYING:
            _next_attempt(work, row, row.not_before)
        elif row.state == StepState.PENDING:  # not_before set: a retry, or resumed
            send_when_due(work, row)
        elif row.state == StepState.LOST:  # declared by its worker (a pool death)
            _after_loss(work, row, losses)
        else:  # running, its heartbeat stopped
            assert row.heartbeat_at is not None
            transitions.declare_lost(
                row, f"worker {row.worker} stopped sending heartbeats (none since "
                f"{row.heartbeat_at:%H:%M:%S}); re-dispatched", now)
            _after_loss(work, row, losses + 1)


def _expire_waits(work: Work, running: list[str]) -> None:
    """A running step that may wait for a person (an agent's question, an approval):
    its waits past their deadline are closed, and the run is watched again at the next
    deadline. Other steps never wait, so a pipeline of scripts asks nothing here."""
    if not any(work.plan.step(s).kind in ("instructions", "approval", "build") for s in running):
        return
    _, due = waits.expire(work.session, work.run.id, work.now)
    if due is not None:
        work.next_due = due if work.next_due is None else min(work.next_due, due)


def _next_attempt(work: Work, row: StepRun, due: datetime | None) -> None:
    # Routed again: the daemon that ran the last attempt may be the one that died.
    try:
        where = route_step(work, work.plan.step(row.step_id), [row.inputs])
    except ResolveError as exc:
        work.fail(row.step_id, row.item_index, str(exc))
        return
    send_when_due(work, records.next_attempt(work.session, row, where, due))


def _after_loss(work: Work, row: StepRun, losses: int) -> None:
    """``row`` was lost, its item's ``losses``-th loss: the next attempt, or (policy's
    RedispatchLost gave up on a worker dying every time) the run fails there."""
    said = policy.after(policy.Ended(policy.Cause.LOST, attempt=row.attempt, losses=losses),
                        work.now)
    if isinstance(said, policy.GiveUp):
        work.fail(row.step_id, row.item_index, said.why)
        note_lost_step(work.session, work.run, row)  # an improvement note
        return
    _next_attempt(work, row, said.not_before)
