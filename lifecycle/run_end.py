"""What a run's end settles beyond its own row: the step that started it (a nested
orchestrator's or an agent's execute_skill call), and the skill's running totals."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy.orm import Session

from lifecycle import transitions
from lifecycle.run_costs import run_usage
from shared.db import skill_stats
from shared.db.models import PipelineRun, StepRun
from shared.plan import Plan
from shared.skillfiles import RunSource
from shared.states import RunState, StepState


def finish_parent(session: Session, run: PipelineRun) -> str | None:
    """A nested orchestrator's run, just ended (or cancelled), settles the parent step
    that started it; the parent's run, to move on (None: nothing to move)."""
    if run.parent_step_run_id is None:
        return None
    parent = session.get(StepRun, run.parent_step_run_id, with_for_update=True)
    if parent is None or StepState(parent.state).terminal:
        return None
    if run.agent_call is not None:
        # An agent step's execute_skill call: the step runs again once every run it
        # waits for has ended, and reads their outcomes then (workers/agent/calls.py).
        if parent.state == StepState.WAITING and transitions.resume_if_done(
                session, parent.id, ended_run=run.id):
            return parent.run_id
        return None
    now = datetime.now(UTC)
    transitions.settle_parent(parent, run, now)
    totals = skill_stats.Totals()
    totals.add(success=parent.state == StepState.SUCCEEDED, duration_ms=parent.duration_ms,
               cost_usd=parent.cost_usd or 0.0, at=now,
               production=parent.source == RunSource.PRODUCTION)
    skill_stats.add(session, parent.skill, skill_stats.STEP, totals)
    return parent.run_id


def count_run(session: Session, run: PipelineRun, plan: Plan) -> None:
    """The ended run in its skill's pipeline totals (``plan``: the run's own)."""
    totals = skill_stats.Totals()
    at = run.finished_at or datetime.now(UTC)
    took = (at - run.started_at).total_seconds() * 1000 if run.started_at else None
    # Only an orchestrator's or an agent's step starts runs under it: no others to look
    # for, and the database sums the run's own items at the commit.
    nests = any(s.kind != "script" for s in plan.steps)
    cost = run_usage(session, [run.id]).get(run.id) if nests else None
    totals.add(success=run.state == RunState.SUCCEEDED, duration_ms=took,
               cost_usd=cost.cost_usd if cost else 0.0, at=at,
               production=run.source == RunSource.PRODUCTION)
    if nests:
        skill_stats.add(session, run.skill, skill_stats.PIPELINE, totals)
    else:
        skill_stats.add_run(session, run.skill, totals, run.id)
