"""Counting a step's open items: zero means the step can settle."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from shared.db.models import StepRun
from shared.states import StepState


def open_items(session: Session, run_id: str, step_id: str) -> int:
    """Attempts of a step still pending or running."""
    return int(session.scalar(select(func.count()).select_from(StepRun).where(
        StepRun.run_id == run_id, StepRun.step_id == step_id,
        StepRun.state.in_([StepState.PENDING.value, StepState.RUNNING.value]))) or 0)
