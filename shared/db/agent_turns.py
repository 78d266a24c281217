"""Reading and writing agent steps' turns (shared/db/agent_models.py).

The caller owns the transaction: a worker records a turn in the same session that
charges it to the step, so a turn is either recorded and counted, or neither.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from shared.db.agent_models import AgentTurn


@dataclass(frozen=True, slots=True)
class TurnKey:
    """The step item a turn belongs to (not the attempt: attempts share its turns)."""

    run_id: str
    step_id: str
    item_index: int  # -1 when the step does not fan out


@dataclass(frozen=True, slots=True)
class TurnRecord:
    """One paid model request: what was asked (digest) and what came back."""

    turn: int
    attempt: int
    model_requested: str
    model_served: str | None
    request_digest: str
    response: dict[str, Any]  # a ModelResponse as JSON (ModelMessagesTypeAdapter)
    tokens_in: int = 0
    tokens_out: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cost_usd: float = 0.0
    duration_ms: float = 0.0
    stop_reason: str | None = None


def record_turn(session: Session, key: TurnKey, record: TurnRecord) -> bool:
    """Record a turn; False when the same turn, for the same request, is already there.

    Two attempts racing over one item (a redelivery beside a slow original) both end up
    with the first answer recorded. A turn recorded for a *different* request means the
    conversation diverged there (a tool answered differently this time): the new answer
    replaces it, and the turns after it, which answered the old branch and can never be
    replayed, are dropped.
    """
    values = {**asdict(key), **asdict(record)}
    new = insert(AgentTurn).values(**values)
    replaced = {k: new.excluded[k] for k in asdict(record) if k != "turn"}
    upsert = new.on_conflict_do_update(
        constraint="uq_agent_turns_item_turn", set_=replaced,
        where=AgentTurn.request_digest != new.excluded.request_digest,
    ).returning(AgentTurn.id)
    written = session.execute(upsert).first() is not None
    if written:
        session.execute(delete(AgentTurn).where(*_of(key), AgentTurn.turn > record.turn))
    return written


def recorded_turns(session: Session, key: TurnKey) -> list[AgentTurn]:
    """The item's turns in request order (turn 0 first)."""
    return list(session.scalars(select(AgentTurn).where(*_of(key)).order_by(AgentTurn.turn)))


def _of(key: TurnKey) -> tuple[Any, ...]:
    return (AgentTurn.run_id == key.run_id, AgentTurn.step_id == key.step_id,
            AgentTurn.item_index == key.item_index)
