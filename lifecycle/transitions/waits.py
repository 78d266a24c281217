"""Waits for a person: opened, decided (answered, approved, rejected), timed out, or
cancelled with their run. The one writer of ``waits.state``, every change checked
against shared/states.py's WAIT_TRANSITIONS and guarded on the state it leaves."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from shared.db.wait_models import Wait
from shared.states import WaitState, check_wait


def open_wait(session: Session, **fields: Any) -> Wait:
    """A new open wait (the caller commits); ``fields`` as shared/db/wait_models.py's."""
    wait = Wait(state=WaitState.OPEN.value, **fields)
    session.add(wait)
    session.flush()
    return wait


def decide(session: Session, wait_id: int, new: WaitState, *, answer: Any = None,
           reason: str | None = None, by: str | None = None,
           now: datetime | None = None) -> Wait | None:
    """The open wait ``wait_id`` moved to ``new``; None when it was no longer open (decided
    by someone else first, timed out, or its run ended): the first decision counts."""
    check_wait(WaitState.OPEN, new)
    row = session.execute(
        update(Wait).where(Wait.id == wait_id, Wait.state == WaitState.OPEN.value)
        .values(state=new.value, answer=answer, reason=reason, decided_by=by,
                decided_at=now or datetime.now(UTC))
        .returning(Wait.id).execution_options(synchronize_session=False)).first()
    return session.get(Wait, wait_id, populate_existing=True) if row else None


def cancel_waits(session: Session, run_id: str, now: datetime | None = None) -> int:
    """Every open wait of a run that ended: nobody is asked any more."""
    check_wait(WaitState.OPEN, WaitState.CANCELLED)
    return len(session.execute(
        update(Wait).where(Wait.run_id == run_id, Wait.state == WaitState.OPEN.value)
        .values(state=WaitState.CANCELLED.value, decided_at=now or datetime.now(UTC),
                reason="its run ended first")
        .returning(Wait.id).execution_options(synchronize_session=False)).all())


def open_count(session: Session, keys_prefix: str) -> int:
    """How many waits of one step item (``<run>/<step>/<item>#``) are still open."""
    return int(session.scalar(select(func.count()).select_from(Wait).where(
        Wait.key.startswith(keys_prefix, autoescape=True),
        Wait.state == WaitState.OPEN.value)) or 0)
