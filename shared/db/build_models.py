"""Skill builds (migration 0018): one row per `skillq build`, keyed by its run. The plan
the planner wrote (shared/build_plan.py), the person's revisions, and each sub-skill's
build as it ends. Its stage changes only in lifecycle/builds.py, checked against
shared/states.py's BUILD_TRANSITIONS."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import DateTime, ForeignKey, Integer, String, Text, func
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from shared.db.models import Base


class Build(Base):
    __tablename__ = "builds"

    run_id: Mapped[str] = mapped_column(ForeignKey("pipeline_runs.id", ondelete="CASCADE"),
                                        primary_key=True)
    vault: Mapped[str] = mapped_column(Text)  # the caller's vault, the drafts' destination
    task: Mapped[str] = mapped_column(Text)
    stage: Mapped[str] = mapped_column(String(16))
    round: Mapped[int] = mapped_column(Integer, default=1)  # one more per revision
    plan: Mapped[dict[str, Any] | None] = mapped_column(JSONB, nullable=True)
    problems: Mapped[list[str]] = mapped_column(JSONB, default=list)  # the last update's
    revisions: Mapped[list[str]] = mapped_column(JSONB, default=list)  # the person's words
    # {skill: {"state": built|failed|skipped, "run_id", "tests", "diagnosis", "draft"}}
    skills: Mapped[dict[str, Any]] = mapped_column(JSONB, default=dict)
    note_id: Mapped[int | None] = mapped_column(Integer, nullable=True)  # --from-note
    improves: Mapped[str | None] = mapped_column(String(64), nullable=True)  # its skill
    daemon: Mapped[str | None] = mapped_column(String(128), nullable=True)  # --daemon
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True),
                                                 server_default=func.now())
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True),
                                                 server_default=func.now())


class DraftToolResult(Base):
    """What a builder's tool call answered, by the call (``<run>/<step>/<item>#<tool call
    id>``): a builder that runs again replays its model's turns, and each call's answer
    must be the one its model read the first time (workers/agent/tool_journal.py)."""

    __tablename__ = "draft_tool_results"

    key: Mapped[str] = mapped_column(String(255), primary_key=True)
    result: Mapped[Any] = mapped_column(JSONB)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True),
                                                 server_default=func.now())
