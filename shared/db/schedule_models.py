"""Schedules: a skill run with fixed inputs on a cron line, fired by `skillq beat`.

``next_due_at`` is the one occurrence beat waits for; beat moves it forward (to the cron
line's next time after now) in the same transaction that decides to fire, so a
schedule never fires twice for one occurrence. The run it started is
``pipeline_runs.triggered_by = "schedule:<id>"``; ``last_run_id`` points at the newest.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Boolean, DateTime, Integer, String, Text, func
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from shared.db.models import Base


class Schedule(Base):
    __tablename__ = "schedules"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    skill: Mapped[str] = mapped_column(String(64), index=True)
    cron: Mapped[str] = mapped_column(String(128))
    tz: Mapped[str] = mapped_column(String(64))  # an IANA zone the cron line is read in
    inputs: Mapped[dict[str, Any]] = mapped_column(JSONB)  # checked at `add` time
    vault: Mapped[str] = mapped_column(Text)  # absolute; beat loads the skill from here
    workdir: Mapped[str] = mapped_column(Text)  # relative input paths resolve here
    catch_up: Mapped[str] = mapped_column(String(8))  # "once" | "skip"
    paused: Mapped[bool] = mapped_column(Boolean, default=False)
    next_due_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)
    last_due_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True),
                                                         nullable=True)
    # "started" | "skipped" (missed, --catch-up skip) | "error" (the run could not start)
    last_outcome: Mapped[str | None] = mapped_column(String(16), nullable=True)
    last_run_id: Mapped[str | None] = mapped_column(String(40), nullable=True)
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_by: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True),
                                                 server_default=func.now())
