"""What a run cost: its own steps and every run they started, to any depth.

A nested orchestrator's run and the runs an agent step's execute_skill calls started
hang off the step that started them (``parent_step_run_id``). An orchestrator's step
that started a nested run records no cost of its own, and an agent step records only its
own model turns, so summing the step attempts of the whole tree counts each cost once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.orm import Session

_TREE = text(
    "WITH RECURSIVE tree(root, id) AS ("
    " SELECT id, id FROM pipeline_runs WHERE id = ANY(:ids)"
    " UNION SELECT t.root, p.id FROM pipeline_runs p"
    " JOIN step_runs s ON p.parent_step_run_id = s.id JOIN tree t ON s.run_id = t.id) "
    "SELECT t.root, coalesce(sum(s.cost_usd), 0) AS cost, "
    "coalesce(sum(s.tokens_in), 0) AS tokens_in, coalesce(sum(s.tokens_out), 0) AS tokens_out "
    "FROM tree t JOIN step_runs s ON s.run_id = t.id GROUP BY t.root")


@dataclass(frozen=True, slots=True)
class RunCost:
    cost_usd: float = 0.0
    tokens_in: int = 0
    tokens_out: int = 0


def tree_costs(session: Session, run_ids: Sequence[str]) -> dict[str, RunCost]:
    """Each run's cost with its tree's (one query for them all); a run with no step
    attempts is absent."""
    if not run_ids:
        return {}
    rows = session.execute(_TREE, {"ids": list(run_ids)}).all()
    return {r.root: RunCost(float(r.cost), int(r.tokens_in), int(r.tokens_out)) for r in rows}
