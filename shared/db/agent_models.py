"""Durable turns of agent steps (migration 0010): every model request, paid for once.

A turn belongs to a step *item*, not to an attempt: a retried or redelivered attempt of
the same item finds the turns already paid for and replays them (workers/agent/replay.py)
instead of sending them again. ``request_digest`` is the SHA-256 of the request's history
in canonical form, so a replay only answers the same conversation.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    DateTime,
    Float,
    ForeignKey,
    Integer,
    String,
    UniqueConstraint,
    func,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from shared.db.models import Base


class AgentTurn(Base):
    __tablename__ = "agent_turns"
    # Its leading run_id also serves the cascade from pipeline_runs.
    __table_args__ = (UniqueConstraint("run_id", "step_id", "item_index", "turn",
                                       name="uq_agent_turns_item_turn"),)

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("pipeline_runs.id", ondelete="CASCADE"))
    step_id: Mapped[str] = mapped_column(String(64))
    item_index: Mapped[int] = mapped_column(Integer)  # -1 when the step does not fan out
    turn: Mapped[int] = mapped_column(Integer)  # 0-based request number within the item
    attempt: Mapped[int] = mapped_column(Integer)  # the attempt that paid for it
    model_requested: Mapped[str] = mapped_column(String(200))  # provider:name asked for
    model_served: Mapped[str | None] = mapped_column(String(200), nullable=True)  # answered
    request_digest: Mapped[str] = mapped_column(String(71))  # "sha256:<hex>"
    # The Pydantic AI ModelResponse as JSON (ModelMessagesTypeAdapter), never a pickle.
    response: Mapped[dict[str, Any]] = mapped_column(JSONB)
    tokens_in: Mapped[int] = mapped_column(Integer, default=0)
    tokens_out: Mapped[int] = mapped_column(Integer, default=0)
    cache_read: Mapped[int] = mapped_column(Integer, default=0)
    cache_write: Mapped[int] = mapped_column(Integer, default=0)
    cost_usd: Mapped[float] = mapped_column(Float, default=0.0)
    duration_ms: Mapped[float] = mapped_column(Float, default=0.0)
    stop_reason: Mapped[str | None] = mapped_column(String(32), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True),
                                                 server_default=func.now())
