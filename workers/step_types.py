"""What a step runner passes around: a claimed attempt (workers/claim.py) and its result
(workers/executors/ run it, workers/step_records.py records it).

A result says how the attempt ended (``state``) and what it leaves to do, as one typed
variant in ``then``: outputs to cache, the runs it waits on, the nested run it started."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from lifecycle.policy import CacheWrite
from shared.attempt_id import AttemptId
from shared.states import StepState


@dataclass
class Claim:
    row_id: str
    run_id: str
    step_id: str
    skill: str
    version: int
    attempt: int
    inputs: dict[str, Any]
    workdir: str | None
    vault: Path  # the run's vault when this machine has it, else the worker's own
    source: str  # the run's source (production, test_window, ...): success rates count it
    # Its cache entry, looked up with the claim: {key: outputs}, empty for a miss; None
    # when not looked up there (``execute`` looks it up itself).
    cached: Mapping[str, Any] | None = None

    @property
    def item_index(self) -> int:
        return AttemptId.parse(self.row_id).item

    @property
    def fans_out(self) -> bool:
        return self.item_index != -1


@dataclass(frozen=True, slots=True)
class WaitingOn:
    """A step waits for the runs its execute_skill calls started, and for a person's
    decision on its open waits (an agent's questions, an approval)."""
    run_ids: tuple[str, ...] = ()
    deadline: bool = False  # one of its waits times out: the planner is to read when


@dataclass(frozen=True, slots=True)
class NestedRunStarted:
    """An orchestrator step started its nested run, which settles the step when it ends."""
    run_id: str


@dataclass(frozen=True, slots=True)
class ScreenLock:
    """A dom0/cmd0 step's turn at the machine's screen (never overlapping another's)."""
    wait_ms: float | None = None  # None: it never queued for the lock
    locked_at: datetime | None = None
    unlocked_at: datetime | None = None


@dataclass
class Result:
    state: StepState
    outputs: Any = None
    error: str | None = None
    error_kind: str | None = None
    cache_hit: bool = False
    exit_code: int | None = None
    stdout_tail: str | None = None
    stderr_tail: str | None = None
    duration_ms: float | None = None
    not_before: datetime | None = None
    screen: ScreenLock | None = None  # a dom0/cmd0 step's wait for the machine's lock
    cost_usd: float = 0.0  # an agent step's model usage (its own turns)
    tokens_in: int = 0
    tokens_out: int = 0
    then: CacheWrite | WaitingOn | NestedRunStarted | None = None
