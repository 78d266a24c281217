"""A message to send once the transaction that decided it has committed: which attempts
it carries, on which queue. The planner and the tasks make them, the launch fence checks
them and the Celery adapter (canvas.py) sends them; none of those owns the shape."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Dispatch:
    step_run_ids: tuple[str, ...]  # one message: several when the step's items are quick
    queue: str
    label: str = ""  # the step's skill: what Flower shows beside the ids (canvas.py)
    urgent: bool = False  # taken before the queue's other messages (canvas.py priority)
