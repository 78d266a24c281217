"""Waits for a person (migration 0017): a question an agent step asked, or an approval
step's decision. One row each; its state changes only in lifecycle/transitions/waits.py,
checked against shared/states.py's WAIT_TRANSITIONS."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import DateTime, ForeignKey, Index, Integer, String, Text, func, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from shared.db.models import Base

QUESTION = "question"
APPROVAL = "approval"


class Wait(Base):
    __tablename__ = "waits"
    __table_args__ = (
        # the inbox, and a run's overdue waits: the open ones only
        Index("ix_waits_open", "run_id", "deadline_at", postgresql_where=text("state = 'open'")),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("pipeline_runs.id", ondelete="CASCADE"),
                                        index=True)
    step_id: Mapped[str] = mapped_column(String(64))
    item_index: Mapped[int] = mapped_column(Integer)
    # "<run>/<step>/<item>#<tool call id>" for a question, "<run>/<step>/<item>#approval"
    # for an approval: whichever attempt of the step item asks again finds it.
    key: Mapped[str] = mapped_column(String(255), unique=True)
    kind: Mapped[str] = mapped_column(String(16))  # QUESTION | APPROVAL
    skill: Mapped[str] = mapped_column(String(64))  # the skill whose step asks
    prompt: Mapped[str] = mapped_column(Text)  # the question, or the approval's message
    choices: Mapped[list[str]] = mapped_column(JSONB, default=list)
    free_text: Mapped[bool] = mapped_column(default=True)
    default: Mapped[Any | None] = mapped_column(JSONB, nullable=True)
    # an approval's: what it shows (name -> value) and the typed inputs it takes
    shown: Mapped[dict[str, Any]] = mapped_column(JSONB, default=dict)
    form: Mapped[list[dict[str, Any]]] = mapped_column(JSONB, default=list)
    state: Mapped[str] = mapped_column(String(16))
    answer: Mapped[Any | None] = mapped_column(JSONB, nullable=True)
    reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    decided_by: Mapped[str | None] = mapped_column(String(128), nullable=True)
    decided_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True),
                                                 server_default=func.now())
    deadline_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    on_timeout: Mapped[str] = mapped_column(String(16), default="reject")  # approvals'
