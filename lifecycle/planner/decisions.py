"""The planner's decisions from plain data: a run's plan and its progress ledger in, what
to do out. No session, no SQL, no ORM row: each is a unit test's to check
(tests/unit/test_planner_decisions.py).

The ledger is the run's ``progress`` column: {step id: {"state": a StepProgress value,
"items": n}}; a step it does not name is waiting. Every change of a step's state in it
goes through ``Progress.start`` or ``Progress.finish``, each checked against
shared/states.py's PROGRESS_TRANSITIONS.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from shared.manifest import OnFailure
from shared.plan import Plan, PlanStep
from shared.states import StepProgress, check_progress

# Items of a step known to be quick go several to a message, so a wide fan-out of cheap
# steps pays the broker and the records per batch, not per item: a batch is sized to
# about settings.batch_target_ms (200 ms) of the skill's recent average duration, at most
# MAX_BATCH items, so the work spreads over as many messages as it has such slices (and,
# when it is more than one slice, over at least MIN_MESSAGES, for a second worker process
# to share it). A skill with no history, or a slow one, goes one item per message.
MAX_BATCH = 64
MIN_MESSAGES = 2

# A stored state's enum member by its text: a dict lookup, not an Enum call, since
# every step is looked at on every pass of an advance.
_STATE = {s.value: s for s in StepProgress}
_WAITING = StepProgress.WAITING


class Progress:
    """A run's ledger, copied from its row (which takes the copy back, ``steps``, when
    the advance ends)."""

    __slots__ = ("steps",)

    def __init__(self, stored: Mapping[str, Mapping[str, Any]] | None) -> None:
        self.steps: dict[str, dict[str, Any]] = {k: dict(v) for k, v in
                                                 (stored or {}).items()}

    def state(self, step_id: str) -> StepProgress:
        entry = self.steps.get(step_id)
        return _WAITING if entry is None else _STATE[entry.get("state", _WAITING)]

    def items(self, step_id: str) -> int:
        """How many items the step was launched with."""
        return int(self.steps[step_id].get("items", 1))

    def running(self, plan: Plan) -> list[str]:
        """The running steps' ids, in the plan's order."""
        state = self.state
        return [s.id for s in plan.steps if state(s.id) is StepProgress.RUNNING]

    def done(self, plan: Plan) -> list[PlanStep]:
        """The done steps (whose values later steps and the run's outputs may use)."""
        state = self.state
        return [s for s in plan.steps if state(s.id) is StepProgress.DONE]

    def ready(self, step: PlanStep) -> bool:
        """Waiting, and every step it waits for is done: to launch."""
        state = self.state
        return state(step.id) is _WAITING and all(
            state(d) is StepProgress.DONE for d in step.after)

    def all_done(self, plan: Plan) -> bool:
        """Every step done: the run succeeds (its outputs permitting)."""
        state = self.state
        return all(state(s.id) is StepProgress.DONE for s in plan.steps)

    def start(self, step_id: str, items: int) -> StepProgress:
        """A waiting step launched with ``items`` items: running, or done at once when it
        has none (a fan-out over nothing continues at once: no empty chord)."""
        new = StepProgress.RUNNING if items else StepProgress.DONE
        check_progress(self.state(step_id), new)
        self.steps[step_id] = {"state": new.value, "items": items}
        return new

    def finish(self, step_id: str) -> None:
        """A running step whose every item is final (and did not fail the run)."""
        check_progress(self.state(step_id), StepProgress.DONE)
        self.steps[step_id]["state"] = StepProgress.DONE.value


@dataclass(frozen=True, slots=True)
class Settled:
    """What a running step whose items are all final comes to: the run fails with
    ``error`` (None: the step is done), its failed items dropped first when ``skip``."""

    error: str | None = None
    skip: bool = False


def settle(step: PlanStep, items: int, failed: int, first_error: str | None) -> Settled:
    """``failed`` of the step's ``items`` items failed, the first of them with
    ``first_error`` (any text: the first failed item's own error, "" or None if it gave
    none)."""
    if not failed:
        return Settled()
    every = failed == items
    if step.on_failure is OnFailure.ABORT or (every and (
            step.fans_out or step.on_failure is OnFailure.SKIP)):
        error = first_error or "failed"
        if every and items > 1:
            error = f"every one of its {items} items failed; the first: {error}"
        return Settled(error=error)
    return Settled(skip=step.on_failure is OnFailure.SKIP)


def may_batch(items: int, target_ms: float) -> bool:
    """Whether items could go several to a message (worth reading the skill's history)."""
    return items >= 2 and bool(target_ms)


def batch_size(items: int, target_ms: float, avg_ms: Any) -> int:
    """Items per message, from the skill's recent average duration in ms (a number as
    the database gives it; None: no history)."""
    if not may_batch(items, target_ms) or avg_ms is None:
        return 1
    by_time = int(target_ms / max(float(avg_ms), 0.1))
    if items <= by_time:  # all of it is one slice of work: one message, no hand-off
        return min(MAX_BATCH, items)
    by_spread = -(-items // MIN_MESSAGES)
    return max(1, min(MAX_BATCH, by_time, by_spread))


def watch_at(now: datetime, dead_after_s: float, next_due: datetime | None,
             armed: datetime | None) -> datetime | None:
    """When the run's watchdog should look next, if it must be (re)armed (None: the one
    ``armed`` will do). One watchdog per run, so a dead worker is noticed with nobody
    watching; sooner when a retry falls due at ``next_due``. A lost watch message is
    caught by every worker's sweep."""
    wanted = now + timedelta(seconds=dead_after_s / 2)
    if next_due is not None:
        wanted = min(wanted, max(next_due, now))
    if armed is None or armed <= now or wanted < armed:
        return wanted
    return None
