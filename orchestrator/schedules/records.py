"""The schedules table: add, list, pause, resume, remove; the caller owns the transaction."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from sqlalchemy import select
from sqlalchemy.orm import Session

from shared.cron import parse_cron
from shared.db.models import PipelineRun
from shared.db.schedule_models import Schedule
from shared.errors import ScheduleError

CatchUp = Literal["once", "skip"]
CATCH_UP: tuple[CatchUp, ...] = ("once", "skip")


@dataclass(frozen=True)
class NewSchedule:
    skill: str
    cron: str
    tz: str
    inputs: Mapping[str, Any]
    vault: str
    workdir: str
    catch_up: CatchUp
    created_by: str


@dataclass(frozen=True)
class ScheduleView:
    """One schedule as `skillq schedule list` shows it."""

    schedule: Schedule
    last_run_state: str | None


def now_utc() -> datetime:
    return datetime.now(UTC)


def add_schedule(session: Session, new: NewSchedule) -> Schedule:
    line = parse_cron(new.cron, new.tz)
    row = Schedule(skill=new.skill, cron=line.text, tz=new.tz, inputs=dict(new.inputs),
                   vault=new.vault, workdir=new.workdir, catch_up=new.catch_up, paused=False,
                   next_due_at=line.next_after(now_utc()), created_by=new.created_by)
    session.add(row)
    session.flush()
    return row


def get_schedule(session: Session, schedule_id: int, *, lock: bool = False) -> Schedule:
    query = select(Schedule).where(Schedule.id == schedule_id)
    row = session.scalars(query.with_for_update() if lock else query).one_or_none()
    if row is None:
        raise ScheduleError(f"no schedule {schedule_id}; `skillq schedule list` shows them")
    return row


def list_schedules(session: Session) -> list[ScheduleView]:
    query = (select(Schedule, PipelineRun.state)
             .outerjoin(PipelineRun, PipelineRun.id == Schedule.last_run_id)
             .order_by(Schedule.id))
    return [ScheduleView(row, state) for row, state in session.execute(query).all()]


def set_paused(session: Session, schedule_id: int, paused: bool) -> Schedule:
    """Pause, or resume: a resumed schedule waits for its next time from now, so the
    occurrences it slept through are not counted as missed."""
    row = get_schedule(session, schedule_id, lock=True)
    if not paused and row.paused:
        row.next_due_at = parse_cron(row.cron, row.tz).next_after(now_utc())
    row.paused = paused
    return row


def remove_schedule(session: Session, schedule_id: int) -> Schedule:
    row = get_schedule(session, schedule_id, lock=True)
    session.delete(row)
    return row


def due_schedules(session: Session, now: datetime) -> Sequence[Schedule]:
    """Unpaused schedules whose time has come, locked for this transaction."""
    return session.scalars(select(Schedule)
                           .where(Schedule.paused.is_(False), Schedule.next_due_at <= now)
                           .order_by(Schedule.next_due_at)
                           .with_for_update(skip_locked=True)).all()


def earliest_due(session: Session) -> datetime | None:
    return session.scalars(select(Schedule.next_due_at).where(Schedule.paused.is_(False))
                           .order_by(Schedule.next_due_at).limit(1)).first()
