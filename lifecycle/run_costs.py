"""What a run cost: its own steps and every run they started, to any depth.

A nested orchestrator's run and the runs an agent step's execute_skill calls started
hang off the step that started them (``parent_step_run_id``). An orchestrator's step
that started a nested run records no cost of its own, and an agent step records only its
own model turns, so summing the step items of the whole tree counts each cost once. The
dashboard, benchmarks.json and the running totals all read it here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import bindparam, func, select
from sqlalchemy.orm import Session

from shared.db.models import PipelineRun, StepRun


@dataclass(frozen=True)
class Usage:
    """What a run's steps cost: USD and model tokens."""

    cost_usd: float = 0.0
    tokens_in: int = 0
    tokens_out: int = 0


# Built once (a run's end asks them): the runs started under these runs' steps, and the
# usage of these runs' step items, each item as its costliest attempt.
_NESTED = (select(StepRun.run_id, PipelineRun.id)
           .join(PipelineRun, PipelineRun.parent_step_run_id == StepRun.id)
           .where(StepRun.run_id.in_(bindparam("runs", expanding=True))))
_ITEMS = (select(StepRun.run_id, func.max(StepRun.cost_usd).label("cost"),
                 func.max(StepRun.tokens_in).label("tokens_in"),
                 func.max(StepRun.tokens_out).label("tokens_out"))
          .where(StepRun.run_id.in_(bindparam("runs", expanding=True)))
          .group_by(StepRun.run_id, StepRun.step_id, StepRun.item_index).subquery())
_USAGE = select(_ITEMS.c.run_id, func.sum(_ITEMS.c.cost), func.sum(_ITEMS.c.tokens_in),
                func.sum(_ITEMS.c.tokens_out)).group_by(_ITEMS.c.run_id)


def run_usage(session: Session, run_ids: Iterable[str]) -> dict[str, Usage]:
    """Each run's usage over its tree: its steps, and every run started under them, all
    the way down; a run with no step attempts is absent.

    Each step item counts once, as its costliest attempt: an attempt's row carries its
    item's turns so far, replayed ones included, so a retried item's attempts are not
    added up. A query per level of nesting finds the runs under, then one sums: a
    constant number per page, not one per run, over ix_step_runs_run_step and
    ix_pipeline_runs_parent_step_run_id. (A recursive CTE had PostgreSQL scan step_runs.)
    A run of script steps only, which starts none, is summed by the database instead
    as its totals are added (shared/db/skill_stats.py ``add_run``).
    """
    ids = list(dict.fromkeys(run_ids))
    root_of = {run_id: run_id for run_id in ids}  # a run -> the listed run it counts toward
    frontier = ids
    while frontier:
        found_under = session.execute(_NESTED, {"runs": frontier}).all()
        frontier = []
        for parent, child in found_under:
            if child not in root_of:
                root_of[child] = root_of[parent]
                frontier.append(child)
    if not root_of:
        return {}
    rows = session.execute(_USAGE, {"runs": list(root_of)}).all()
    found: dict[str, Usage] = {}
    for run_id, cost, t_in, t_out in rows:
        root = root_of[run_id]
        seen = found.get(root, Usage())
        found[root] = Usage(seen.cost_usd + float(cost or 0), seen.tokens_in + int(t_in or 0),
                            seen.tokens_out + int(t_out or 0))
    return found
