"""An agent step item's recorded turns: read once when it (re)starts, each new one
written as it is paid for, and the limits checked before each request (its run
cancelled, its budget spent, the skills it executed included)."""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from shared.attempt_id import AttemptId
from shared.db.agent_turns import TurnKey, TurnRecord, record_turn, recorded_turns
from shared.db.models import StepRun
from shared.db.session import transaction
from shared.states import StepState
from workers.agent.replay import Turn

# The step costs of every run an agent step item started with execute_skill, and of the
# runs those started, to any depth.
_TREE_COST = (
    "WITH RECURSIVE tree(id) AS ("
    " SELECT id FROM pipeline_runs WHERE starts_with(agent_call, :prefix)"
    " UNION SELECT p.id FROM pipeline_runs p JOIN step_runs s ON p.parent_step_run_id = s.id"
    " JOIN tree t ON s.run_id = t.id) "
    "SELECT coalesce(sum(cost_usd), 0) FROM step_runs WHERE run_id IN (SELECT id FROM tree)")


# A step's state read this recently (with its turns, or with the turn just recorded)
# stands for a read before the next request: a read of its own only after a tool call
# that took longer, during which its run may have been cancelled.
STATE_FRESH_S = 0.25


class BudgetSpent(Exception):
    """The step item's turns have cost its ``budget_usd``: no request is paid for."""


class StepCancelled(Exception):  # a signal: its run was cancelled, nothing more is paid for
    pass


class Turns:
    """The step item's recorded turns, read once, written as each is paid for (its own
    transaction: a turn paid for is on record even if the worker dies a moment later)."""

    def __init__(self, database_url: str, key: TurnKey, attempt: int,
                 budget_usd: float | None, row_id: str) -> None:
        self.database_url, self.key, self.attempt = database_url, key, attempt
        self.budget_usd, self.row_id = budget_usd, row_id
        with transaction(database_url) as session:
            self.rows = {t.turn: _turn_of(t) for t in recorded_turns(session, key)}
            # what its execute_skill runs cost, however deep: read when it (re)starts,
            # which is after every run it waited for has ended
            self.sub_skills_usd = float(session.scalar(text(_TREE_COST), {
                "prefix": AttemptId.parse(row_id).calls_prefix}) or 0.0)
            self._seen = (self._state(session), time.monotonic())

    def recorded(self, index: int) -> Turn | None:
        return self.rows.get(index)

    def before_request(self, index: int) -> None:
        # An agent step has no process for `skillq cancel` to end: it stops here, before
        # the next request is paid for (one indexed read, in the turn's own transaction
        # when it is fresh).
        state, at = self._seen
        if time.monotonic() - at > STATE_FRESH_S:
            with transaction(self.database_url) as session:
                state = self._state(session)
        if state == StepState.CANCELLED:
            raise StepCancelled(f"cancelled: its run was cancelled before model request "
                                f"{index + 1}")
        spent = self.cost_usd + self.sub_skills_usd
        if self.budget_usd is not None and spent >= self.budget_usd:
            raise BudgetSpent(f"budget of ${self.budget_usd:g} reached (spent "
                              f"${spent:.4f}: {len(self.rows)} model request(s) of its own, "
                              f"${self.sub_skills_usd:.4f} in the skills it executed)")

    def record(self, turn: Turn) -> None:
        record = TurnRecord(
            turn=turn.index, attempt=self.attempt, model_requested=turn.model_requested,
            model_served=turn.model_served, request_digest=turn.digest,
            response=turn.response, tokens_in=turn.tokens_in, tokens_out=turn.tokens_out,
            cache_read=turn.cache_read, cache_write=turn.cache_write,
            cost_usd=turn.cost_usd, duration_ms=turn.duration_ms,
            stop_reason=turn.stop_reason)
        with transaction(self.database_url) as session:
            record_turn(session, self.key, record)
            self._seen = (self._state(session), time.monotonic())
        # a new answer for an earlier turn replaces it and drops the turns after it
        self.rows = {i: t for i, t in self.rows.items() if i < turn.index}
        self.rows[turn.index] = turn

    def _state(self, session: Session) -> str | None:
        return session.scalar(select(StepRun.state).where(StepRun.id == self.row_id))

    @property
    def cost_usd(self) -> float:
        return sum(t.cost_usd for t in self.rows.values())


def _turn_of(row: Any) -> Turn:
    return Turn(index=row.turn, digest=row.request_digest, response=row.response,
                model_requested=row.model_requested, model_served=row.model_served,
                tokens_in=row.tokens_in, tokens_out=row.tokens_out, cache_read=row.cache_read,
                cache_write=row.cache_write, cost_usd=row.cost_usd,
                duration_ms=row.duration_ms, stop_reason=row.stop_reason)
