"""Run states as string enums with explicit transitions (the dashboard queries these).

    pipeline: pending -> running -> succeeded | failed | cancelled
    step:     pending -> running -> succeeded | failed | skipped | retrying | lost
              retrying and lost are terminal for that attempt: a new attempt row follows
"""

from __future__ import annotations

from enum import StrEnum


class RunState(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        return self in (RunState.SUCCEEDED, RunState.FAILED, RunState.CANCELLED)


class StepState(StrEnum):
    PENDING = "pending"  # dispatched, waiting in its queue
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"  # permanent for this step (after retries)
    SKIPPED = "skipped"  # failed, and on_failure: skip dropped the item
    RETRYING = "retrying"  # transient failure; the next attempt is scheduled
    LOST = "lost"  # its worker died; the next attempt was dispatched

    @property
    def terminal(self) -> bool:
        return self not in (StepState.PENDING, StepState.RUNNING)

    @property
    def final(self) -> bool:
        """Terminal with no further attempt coming."""
        return self in (StepState.SUCCEEDED, StepState.FAILED, StepState.SKIPPED)


RUN_TRANSITIONS: dict[RunState, frozenset[RunState]] = {
    RunState.PENDING: frozenset({RunState.RUNNING, RunState.FAILED, RunState.CANCELLED}),
    RunState.RUNNING: frozenset({RunState.SUCCEEDED, RunState.FAILED, RunState.CANCELLED}),
    RunState.SUCCEEDED: frozenset(),
    RunState.FAILED: frozenset(),
    RunState.CANCELLED: frozenset(),
}

STEP_TRANSITIONS: dict[StepState, frozenset[StepState]] = {
    StepState.PENDING: frozenset({StepState.RUNNING, StepState.SUCCEEDED, StepState.FAILED,
                                  StepState.SKIPPED, StepState.LOST}),
    StepState.RUNNING: frozenset({StepState.SUCCEEDED, StepState.FAILED, StepState.SKIPPED,
                                  StepState.RETRYING, StepState.LOST, StepState.RUNNING}),
    StepState.SUCCEEDED: frozenset(),
    StepState.FAILED: frozenset(),
    StepState.SKIPPED: frozenset(),
    StepState.RETRYING: frozenset(),
    StepState.LOST: frozenset(),
}


class IllegalTransition(Exception):
    """A state change the machine does not allow (a bug, or a stale redelivery)."""


def check_run(old: RunState, new: RunState) -> None:
    if new not in RUN_TRANSITIONS[old]:
        raise IllegalTransition(f"pipeline run cannot go from {old} to {new}")


def check_step(old: StepState, new: StepState) -> None:
    if new not in STEP_TRANSITIONS[old]:
        raise IllegalTransition(f"step run cannot go from {old} to {new}")
