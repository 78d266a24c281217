"""A build's budget (`skillq build --budget-usd`): what it may spend over every run it
starts. Each agent it starts gets what is left as a hard cap on its own turns, split
between the builders that start together; once nothing is left, no new stage starts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy.orm import Session

from lifecycle.run_costs import run_usage


class BudgetSpent(Exception):
    """The build spent its budget: nothing more is started."""


def budget_left(session: Session, build_id: str, inputs: Mapping[str, Any]) -> float | None:
    """What the build may still spend; None without a budget. BudgetSpent at none."""
    budget = float(inputs.get("budget_usd") or 0)
    if budget <= 0:
        return None
    found = run_usage(session, [build_id]).get(build_id)
    spent = found.cost_usd if found else 0.0
    if spent >= budget:
        raise BudgetSpent(f"budget of ${budget:g} spent (${spent:.4f}): nothing more is "
                          "started; give a larger --budget-usd to build it")
    return budget - spent
