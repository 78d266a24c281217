"""Reading run records back: lists of runs and one run's tree (repository functions)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session, defer

from shared.db.agent_models import AgentTurn
from shared.db.models import PipelineRun, StepRun
from shared.db.wait_models import Wait


@dataclass(frozen=True)
class RunFilter:
    """Which top-level runs a listing shows; an empty field does not narrow."""

    skill: str | None = None
    states: tuple[str, ...] = ()
    source: str | None = None
    since: datetime | None = None  # aware: created at or after
    # "cli", "dashboard", a parent skill's name, "schedule:3"; a bare kind ("schedule",
    # "test") matches every "<kind>:<id>".
    trigger: str | None = None


def recent_runs(session: Session, where: RunFilter, limit: int = 20) -> Sequence[PipelineRun]:
    """The newest top-level runs first (a nested run is its parent step's business)."""
    query = select(PipelineRun).where(PipelineRun.parent_step_run_id.is_(None))
    if where.skill:
        query = query.where(PipelineRun.skill == where.skill)
    if where.states:
        query = query.where(PipelineRun.state.in_(where.states))
    if where.source:
        query = query.where(PipelineRun.source == where.source)
    if where.since is not None:
        query = query.where(PipelineRun.created_at >= where.since)
    if where.trigger:
        kind = where.trigger.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        query = query.where((PipelineRun.triggered_by == where.trigger)
                            | PipelineRun.triggered_by.like(kind + ":%", escape="\\"))
    return session.scalars(query.order_by(PipelineRun.created_at.desc(),
                                          PipelineRun.id).limit(limit)).all()


@dataclass
class RunTree:
    run: PipelineRun
    steps: list[StepRun]  # every attempt, in step order then item then attempt
    children: dict[str, RunTree] = field(default_factory=dict)  # by parent step-run id
    # The agent steps' model requests, by step, item and turn (only when asked for).
    turns: list[AgentTurn] = field(default_factory=list)
    waits: list[Wait] = field(default_factory=list)  # its questions and approvals

    def waits_of(self, step_id: str, item: int) -> list[Wait]:
        return [w for w in self.waits if w.step_id == step_id and w.item_index == item]


def run_tree(session: Session, run_id: str, *, turns: bool = False,
             responses: bool = False) -> RunTree | None:
    """The run, its attempts and its nested runs; ``turns`` loads the agent turns too
    (one query per run), ``responses`` with what the model answered (else that column
    is not read, and touching it raises)."""
    run = session.get(PipelineRun, run_id)
    if run is None:
        return None
    rows = list(session.scalars(select(StepRun).where(StepRun.run_id == run_id)
                                .order_by(StepRun.created_at, StepRun.item_index,
                                          StepRun.attempt)).all())
    tree = RunTree(run, rows, waits=list(session.scalars(
        select(Wait).where(Wait.run_id == run_id).order_by(Wait.id)).all()))
    if turns:
        query = select(AgentTurn).where(AgentTurn.run_id == run_id).order_by(
            AgentTurn.step_id, AgentTurn.item_index, AgentTurn.turn)
        if not responses:
            query = query.options(defer(AgentTurn.response, raiseload=True))
        tree.turns = list(session.scalars(query).all())
    for row in rows:
        if row.child_run_id:
            child = run_tree(session, row.child_run_id, turns=turns, responses=responses)
            if child is not None:
                tree.children[row.id] = child
    return tree


def latest_states(session: Session, run_ids: Sequence[str]) -> dict[str, int]:
    """Counts of the newest attempt's state of every step item of these runs."""
    newest = (select(StepRun.run_id, StepRun.step_id, StepRun.item_index,
                     func.max(StepRun.attempt).label("attempt"))
              .where(StepRun.run_id.in_(run_ids))
              .group_by(StepRun.run_id, StepRun.step_id, StepRun.item_index).subquery())
    rows = session.execute(
        select(StepRun.state, func.count()).join(
            newest, (StepRun.run_id == newest.c.run_id) & (StepRun.step_id == newest.c.step_id)
            & (StepRun.item_index == newest.c.item_index)
            & (StepRun.attempt == newest.c.attempt))
        .group_by(StepRun.state)).all()
    return {state: int(count) for state, count in rows}


def descendant_run_ids(session: Session, run_id: str) -> list[str]:
    ids, frontier = [run_id], [run_id]
    while frontier:
        children = session.scalars(select(StepRun.child_run_id).where(
            StepRun.run_id.in_(frontier), StepRun.child_run_id.is_not(None))).all()
        frontier = [c for c in children if c and c not in ids]
        ids.extend(frontier)
    return ids
