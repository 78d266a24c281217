"""What a step runner passes around: a claimed attempt and its result (workers/step_runner.py
claims and runs, workers/step_records.py records)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from shared.attempt_id import AttemptId
from shared.states import StepState
from workers.screen.executor import ScreenRun


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
    screen: ScreenRun | None = None  # a dom0/cmd0 step: its wait for the machine's lock
    cost_usd: float = 0.0  # an agent step's model usage (its own turns)
    tokens_in: int = 0
    tokens_out: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
