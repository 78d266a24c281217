"""Finished steps' values and what references resolve against: a launching step's
inputs and fan-out list, and the run's outputs at its end."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from lifecycle.planner import records
from lifecycle.planner.work import Work
from shared.manifest import OnFailure
from shared.plan import PlanStep
from shared.resolve import Scope, resolve
from shared.states import StepState
from shared.store import unpack


class _Values(Mapping[str, Any]):
    """Finished steps' values, read from their records only when a reference asks: a
    step after a wide fan-out that does not refer to it never loads its outputs."""

    def __init__(self, work: Work, done: list[PlanStep]) -> None:
        self.work = work
        self.done = {s.id: s for s in done}

    def __getitem__(self, step_id: str) -> Any:
        return value(self.work, self.done[step_id])

    def __iter__(self) -> Iterator[str]:
        return iter(self.done)

    def __len__(self) -> int:
        return len(self.done)


def value(work: Work, step: PlanStep) -> Any:
    """A finished step's value: its items' outputs in order (None for a failed one
    under on_failure: continue). A finished step's items all have a final attempt,
    and no item has two."""
    if step.id in work.values:
        return work.values[step.id]
    if step.id in work.lone:
        stored = work.lone[step.id]
        work.values[step.id] = None if stored is None else unpack(work.session,
                                                                  json.loads(stored))
        return work.values[step.id]
    results = []
    for state, outputs in records.outcomes(work.session, work.run.id, step.id):
        if state == StepState.SUCCEEDED:
            results.append(unpack(work.session, outputs))
        elif step.on_failure is OnFailure.CONTINUE:
            results.append(None)
    found = results if step.fans_out else (results[0] if results else None)
    work.values[step.id] = found
    return found


def scope(work: Work, item: Any = None, has_item: bool = False) -> Scope:
    """What references resolve against now: the run's inputs, the done steps' values."""
    done = work.progress.done(work.plan)
    return Scope(inputs=work.run.inputs, steps=_Values(work, done),
                 fan_out=frozenset(s.id for s in done if s.fans_out),
                 array_outputs={s.id: frozenset(s.array_outputs) for s in done},
                 item=item, has_item=has_item)


def run_outputs(work: Work) -> Any:
    """The run's outputs, every step done (ResolveError: a reference could not be)."""
    plan = work.plan
    if plan.outputs_of is not None:
        return value(work, plan.step(plan.outputs_of))
    at_end = scope(work)
    return {name: resolve(expr, at_end) for name, expr in plan.outputs.items()}
