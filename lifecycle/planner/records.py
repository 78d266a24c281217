"""The planner's own SQL and ORM work: the run's row (locked), a finished step's
outcomes, a retry's reused items, a skill's recent durations (batch sizing) and the
attempts it adds.

The rest of an advance's statements are its helpers': lifecycle/step_counts.py's index
probes (open, wanting, lost and failed items), the writes of lifecycle/transitions/,
the daemons read of lifecycle/routing.py and the totals of lifecycle/run_end.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import String, bindparam, func, select
from sqlalchemy.orm import Session, defer, make_transient_to_detached

from lifecycle import step_counts, transitions
from lifecycle.routing import Route
from shared.attempt_id import AttemptId
from shared.db import deferred
from shared.db.models import PipelineRun, StepRun
from shared.db.txn_context import context
from shared.plan import PlanStep
from shared.states import StepState

HISTORY_WINDOW = 20  # a skill's recent successes its batches are sized from

# -- the run's row ----------------------------------------------------------------------

# A run's inputs hold its fan-out lists (large in a wide fan-out) and its outputs their
# results: read when a step is launched or the run ends, not on every advance.
LAZY = (defer(PipelineRun.inputs), defer(PipelineRun.outputs))


def lock_run(session: Session, run_id: str) -> PipelineRun | None:
    """The run's row, locked for this transaction: what ``advance`` plans from."""
    # A run this session recorded (as `skillq run` plans the first step in the
    # transaction that records the run) is no other transaction's to see yet: the object
    # itself, whole (its first launch reads the inputs).
    new = context(session).new_runs.get(run_id)
    if new is not None and new in session:
        return new
    run = session.get(PipelineRun, run_id, options=LAZY, with_for_update=True)
    if run is not None:
        deferred.held(session, run)  # its UPDATE goes in the commit's pipeline
    return run


def locked_run(session: Session, columns: dict[str, Any]) -> PipelineRun:
    """The run whose row ``transitions.claim_lone`` locked, in this session as
    ``lock_run`` would give it (its inputs and outputs read if used). The session has
    not loaded it before.

    Made as the ORM makes an object it loads, its columns set as loaded values: the
    instrumented constructor records each as a change first (CPU spent for nothing on
    every lone cache hit's path)."""
    # ORM internals, on purpose and only here: the mapper's bare instance, filled as a
    # load fills it, then attached as persistent. PipelineRun(**columns) would be the
    # public way, and costs that path 0.2 ms of CPU (benchmarks/README.md).
    run: PipelineRun = PipelineRun.__mapper__.class_manager.new_instance()
    run.__dict__.update(columns)
    make_transient_to_detached(run)
    session.add(run)
    deferred.held(session, run)
    return run


# -- reads of step rows -----------------------------------------------------------------

FINAL = [s for s in StepState if s.final]

# A finished step's items' outcomes in item order (built once: every run's end asks it).
_VALUES = (select(StepRun.state, StepRun.outputs)
           .where(StepRun.run_id == bindparam("run_id", type_=String),
                  StepRun.step_id == bindparam("step_id", type_=String),
                  step_counts.in_state(*FINAL)).order_by(StepRun.item_index))


def outcomes(session: Session, run_id: str, step_id: str) -> Iterable[Any]:
    """(state, stored outputs) of a finished step's final attempts, in item order."""
    return session.execute(_VALUES, {"run_id": run_id, "step_id": step_id})


def reused_items(session: Session, run: PipelineRun, step_id: str) -> set[int]:
    """The items of a retry's run already recorded succeeded (lifecycle/retry.py copies
    them from the run it retries): not run again. Only a retry's run has attempts
    before its steps launch, so no other run asks."""
    if run.retry_of is None:
        return set()
    return set(session.scalars(select(StepRun.item_index).where(
        StepRun.run_id == run.id, StepRun.step_id == step_id,
        step_counts.in_state(StepState.SUCCEEDED))))


def recent_avg_ms(session: Session, skill: str) -> Any:
    """The skill's average duration over its last HISTORY_WINDOW successes (None: none)."""
    recent = (select(StepRun.duration_ms)
              .where(StepRun.skill == skill, StepRun.state == StepState.SUCCEEDED.value,
                     StepRun.finished_at.is_not(None))
              .order_by(StepRun.finished_at.desc()).limit(HISTORY_WINDOW).subquery())
    return session.scalar(select(func.avg(recent.c.duration_ms)))


# -- attempts added ---------------------------------------------------------------------

def first_attempts(session: Session, run: PipelineRun, step: PlanStep,
                   prepared: Sequence[tuple[int, Any, str]], where: Route,
                   size: int) -> list[str]:
    """Insert the first attempts of a step's items (item, packed inputs, input hash),
    pending, each on its batch's queue (``size`` items a message); their ids."""
    ids = [AttemptId.text(run.id, step.id, index, 1) for index, _, _ in prepared]
    # Rows are made as COPY takes them, not held all at once (a wide fan-out's are
    # most of what an advance holds); prepared keeps only what each row needs.
    transitions.launch_attempts(session, (
        {"id": ids[n], "run_id": run.id, "step_id": step.id, "item_index": index,
         "attempt": 1, "skill": step.skill, "version": step.version,
         "state": StepState.PENDING.value, "source": run.source,
         "queue": where.queue_for(n // size), "inputs": packed, "input_hash": digest,
         "not_before": None, "route": where.reason}
        for n, (index, packed, digest) in enumerate(prepared)),
        at_commit=transitions.is_new(session, run.id))
    return ids


def next_attempt(session: Session, row: StepRun, where: Route,
                 due: datetime | None) -> StepRun:
    """The item's next attempt after ``row`` (a retry, or a re-dispatch after a loss),
    pending on ``where``'s queue, sent from ``due`` (None: at once)."""
    return transitions.add_attempt(
        session, follows=row,
        id=str(AttemptId(row.run_id, row.step_id, row.item_index, row.attempt + 1)),
        run_id=row.run_id, step_id=row.step_id, item_index=row.item_index,
        attempt=row.attempt + 1, skill=row.skill, version=row.version, source=row.source,
        queue=where.queue_for(row.item_index + 1), route=where.reason, inputs=row.inputs,
        input_hash=row.input_hash, not_before=due)
