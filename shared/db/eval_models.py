"""Evals as recorded (migration 0019): one row per `skillq eval`, and one per run it
judged. The runs themselves are pipeline runs of source ``eval``; these rows keep what a
run's record does not: the case, the arm it belongs to, and its verdict assertion by
assertion, so `skillq bench --compare` and the dashboard read evals back without
running anything."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    func,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from shared.db.models import Base


class EvalRecord(Base):
    __tablename__ = "evals"
    __table_args__ = (Index("ix_evals_skill_created", "skill", "created_at"),)

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    skill: Mapped[str] = mapped_column(String(64))
    subject: Mapped[str] = mapped_column(String(40))  # "v2", or "draft" (the folder)
    baseline: Mapped[str | None] = mapped_column(String(40), nullable=True)  # none|vN|draft
    runs_per_case: Mapped[int] = mapped_column(Integer)
    pass_rate: Mapped[float | None] = mapped_column(Float, nullable=True)  # the subject's
    baseline_pass_rate: Mapped[float | None] = mapped_column(Float, nullable=True)
    spent_usd: Mapped[float] = mapped_column(Float, default=0.0)
    stopped: Mapped[str | None] = mapped_column(Text, nullable=True)
    report: Mapped[dict[str, Any]] = mapped_column(JSONB)  # as `skillq eval --json` prints
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True),
                                                 server_default=func.now())


class EvalResult(Base):
    __tablename__ = "eval_results"
    __table_args__ = (Index("ix_eval_results_skill_version", "skill", "version"),)

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    eval_id: Mapped[str] = mapped_column(ForeignKey("evals.id", ondelete="CASCADE"))
    arm: Mapped[str] = mapped_column(String(16))  # "skill" | "baseline"
    skill: Mapped[str] = mapped_column(String(64))
    version: Mapped[int] = mapped_column(Integer)
    # which of the skill's forms ran: "published" (that version, as stored), "draft" (an
    # edited folder) or "bare" (the same request, no skill loaded)
    form: Mapped[str] = mapped_column(String(16))
    case_id: Mapped[str] = mapped_column(String(128))
    run_id: Mapped[str] = mapped_column(String(40))
    passed: Mapped[bool] = mapped_column(Boolean)
    checks: Mapped[list[dict[str, Any]]] = mapped_column(JSONB)  # [{assertion, passed}]
    problems: Mapped[list[str]] = mapped_column(JSONB)
    duration_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    tokens: Mapped[int] = mapped_column(Integer, default=0)
    cost_usd: Mapped[float] = mapped_column(Float, default=0.0)
