"""Records of the skill lifecycle's feedback: improvement notes left by production
failures, and the last result of every test case (migration 0004)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    Boolean,
    DateTime,
    Float,
    Index,
    Integer,
    String,
    Text,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from shared.db.models import Base

# A note that still counts repeats: open, or wontfix (known, counted, not shown as open).
LIVE_STATUSES = ("open", "wontfix")
LIVE_WHERE = text("status IN ('open', 'wontfix')")


class ImprovementNote(Base):
    """One kind of failure of one step of one skill version, for the user to act on.

    Repeats of the same (skill, version, step, diagnosis) bump ``count`` and
    ``last_seen`` on the live note instead of adding another.
    """

    __tablename__ = "improvement_notes"
    __table_args__ = (
        Index("uq_improvement_notes_live", "skill", "version", "step_id", "diagnosis",
              unique=True, postgresql_where=LIVE_WHERE),
        Index("ix_improvement_notes_skill_status", "skill", "status"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    skill: Mapped[str] = mapped_column(String(64))
    version: Mapped[int] = mapped_column(Integer)
    step_id: Mapped[str] = mapped_column(String(64))
    pipeline: Mapped[str] = mapped_column(String(64))  # the run's own skill
    run_id: Mapped[str] = mapped_column(String(40))  # the latest run that failed so
    step_run_id: Mapped[str] = mapped_column(String(160))
    error: Mapped[str] = mapped_column(Text)
    error_kind: Mapped[str | None] = mapped_column(String(32), nullable=True)
    exit_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    inputs: Mapped[Any] = mapped_column(JSONB)  # secrets redacted
    diagnosis: Mapped[str] = mapped_column(String(32))
    summary: Mapped[str] = mapped_column(Text)
    suggested_fix: Mapped[str] = mapped_column(Text)
    worker: Mapped[str | None] = mapped_column(String(200), nullable=True)
    count: Mapped[int] = mapped_column(Integer, default=1)
    status: Mapped[str] = mapped_column(String(16), default="open")
    first_seen: Mapped[datetime] = mapped_column(DateTime(timezone=True),
                                                 server_default=func.now())
    last_seen: Mapped[datetime] = mapped_column(DateTime(timezone=True),
                                                server_default=func.now())
    closed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class TestResult(Base):
    """One test case's outcome in one `skillq test` (or publish) pass."""

    __test__ = False  # not a pytest class
    __tablename__ = "test_results"
    __table_args__ = (Index("ix_test_results_skill_case", "skill", "test_id", "created_at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    skill: Mapped[str] = mapped_column(String(64))
    version: Mapped[int] = mapped_column(Integer)
    test_id: Mapped[str] = mapped_column(String(128))
    run_id: Mapped[str | None] = mapped_column(String(40), nullable=True)  # None: refused
    passed: Mapped[bool] = mapped_column(Boolean)
    problems: Mapped[list[str]] = mapped_column(JSONB)  # why it failed; [] when it passed
    duration_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True),
                                                 server_default=func.now())
