"""What a session's work leaves for later work of the same transaction to read.

Transitions, the planner and the commit's pipeline (deferred.py) hand each other facts
that no statement needs to fetch again: a run this transaction inserted, the outputs
of a lone step it recorded succeeded, the writes held for the COMMIT. They live on the
session (a session is one transaction: shared/db/session.py ``transaction``), in one
typed object under one key of ``session.info``, rather than in loose keys of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy.orm import Session, SessionTransaction

if TYPE_CHECKING:
    from shared.db.models import PipelineRun

_KEY = "skillq.txn_context"


@dataclass(slots=True)
class TxnContext:
    # The runs this session recorded (lifecycle/transitions/runs.py ``new_run``), by id:
    # the planner takes the object itself, unlocked and unread.
    new_runs: dict[str, PipelineRun] = field(default_factory=dict)
    # (run, step) -> stored outputs (JSON text, or None) of the steps (not fan-outs: one
    # item) whose attempt this session recorded succeeded. That attempt was its item's
    # live one (the finish matched it running), so the step's only item is final: the
    # planner skips the reads that would say so.
    succeeded_lone: dict[tuple[str, str], str | None] = field(default_factory=dict)
    # Held for the commit (deferred.py ``pending``): key -> what was added, in order.
    # Emptied when the transaction ends, as are the savepoints' marks.
    pending: dict[str, list[Any]] = field(default_factory=dict)
    # An open savepoint -> {key: length of its pending list when the savepoint began}.
    saved: dict[SessionTransaction, dict[str, int]] = field(default_factory=dict)


def context(session: Session) -> TxnContext:
    """The session's context, made on first use."""
    info = session.info
    found: TxnContext | None = info.get(_KEY)
    if found is None:
        found = info[_KEY] = TxnContext()
    return found


def drop_pending(session: Session) -> None:
    """Forget what was held for the commit and the savepoints' marks: the transaction
    committed (its writes sent), rolled back or closed. The other facts stay for the
    session's life."""
    found: TxnContext | None = session.info.get(_KEY)
    if found is not None:
        found.pending = {}
        found.saved = {}
