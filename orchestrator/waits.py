"""A person's side of a wait: the inbox of open questions and approvals, and the
answer, approval or rejection that moves a waiting run on (lifecycle/waits.py decides;
this commits and sends the run's next messages). The CLI, the local API, the dashboard
and MCP all come here."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy import select
from sqlalchemy.orm import Session

from lifecycle import waits
from lifecycle.tasks import advance_in, send_outcome
from orchestrator.connect import Connection, client_context
from shared.db.models import PipelineRun
from shared.db.outage import through_outage
from shared.db.session import transaction
from shared.db.wait_models import APPROVAL, QUESTION, Wait
from shared.errors import RunNotFound
from shared.store import unpack

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Waiting:
    """One open question or approval, as the inbox lists it."""

    id: int
    kind: str  # question | approval
    run_id: str
    top_run_id: str  # the run a person started (a question may come from a sub-skill's)
    pipeline: str  # the top run's skill
    step_id: str
    skill: str
    prompt: str
    since: datetime
    deadline: datetime | None
    who: str  # who can answer: whoever started the run, from where
    choices: tuple[str, ...] = ()
    free_text: bool = True
    default: Any = None
    shown: Mapping[str, Any] = field(default_factory=dict)
    form: tuple[Mapping[str, Any], ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "run_id": self.run_id,
                "top_run_id": self.top_run_id, "pipeline": self.pipeline,
                "step": self.step_id, "skill": self.skill, "asks": self.prompt,
                "since": self.since.isoformat(), "who": self.who,
                "deadline": self.deadline.isoformat() if self.deadline else None,
                "choices": list(self.choices), "free_text": self.free_text,
                "default": self.default, "shown": dict(self.shown),
                "inputs": [dict(f) for f in self.form]}


def _who(run: PipelineRun) -> str:
    started = run.triggered_by or "unknown"
    return (f"whoever started it ({started}): skillq answer/approve/reject, the dashboard "
            "or MCP")


def waiting(session: Session, wait: Wait) -> Waiting:
    run = session.get(PipelineRun, wait.run_id)
    assert run is not None  # a wait's run is its foreign key
    top = waits.top_run(session, run)
    # an approval's inputs with the defaults the planner resolved (as `skillq approve`
    # takes them)
    form = tuple(s.written() for s in waits.form_manifest(wait).inputs) \
        if wait.kind == APPROVAL else ()
    return Waiting(id=wait.id, kind=wait.kind, run_id=wait.run_id, top_run_id=top.id,
                   pipeline=top.skill, step_id=wait.step_id, skill=wait.skill,
                   prompt=wait.prompt, since=wait.created_at, deadline=wait.deadline_at,
                   who=_who(top), choices=tuple(wait.choices or ()),
                   free_text=wait.free_text,
                   default=wait.default if wait.kind == QUESTION else None,
                   shown=unpack(session, wait.shown or {}), form=form)


def inbox(conn: Connection, run_id: str | None = None) -> list[Waiting]:
    """Every open question and approval, oldest first (of one run and the runs it
    started, when ``run_id`` is given)."""
    def read() -> list[Waiting]:
        with transaction(conn.endpoints.database_url) as session:
            runs = None
            if run_id is not None:
                if session.get(PipelineRun, run_id) is None:
                    raise RunNotFound(run_id)
                runs = waits.run_tree(session, run_id)
            return [waiting(session, w) for w in waits.open_waits(session, runs)]
    return _outlasting(conn, read, "reading the inbox")


@dataclass(frozen=True, slots=True)
class Decided:
    wait_id: int
    kind: str
    run_id: str
    step_id: str
    state: str  # answered | approved | rejected
    value: Any = None  # the answer, or the approver's inputs


def answer(conn: Connection, run_id: str, which: str | None, *, text: str | None = None,
           choice: int | None = None, by: str) -> Decided:
    """Answer run ``run_id``'s open question (``which`` of several: its #id or step)."""
    def decide(session: Session, wait: Wait) -> tuple[str | None, Any]:
        value = waits.answer_value(wait, text, choice)
        return waits.answer(session, wait, value, by), value
    return _decide(conn, run_id, QUESTION, which, decide, "answered")


def approve(conn: Connection, run_id: str, which: str | None, *,
            given: Mapping[str, Any] | None = None, pairs: Sequence[str] = (),
            by: str) -> Decided:
    """Approve run ``run_id``'s open approval with the approver's inputs: ``given`` (a
    JSON object's values) or ``pairs`` (``--input NAME=VALUE``, typed by its form)."""
    def decide(session: Session, wait: Wait) -> tuple[str | None, Any]:
        values = dict(given or {})
        if pairs:
            values.update(waits.parse_pairs(wait, pairs))
        moved = waits.approve(session, wait, values, by)
        return moved, wait.answer  # as decided: the inputs with their defaults
    return _decide(conn, run_id, APPROVAL, which, decide, "approved")


def reject(conn: Connection, run_id: str, which: str | None, *, reason: str,
           by: str) -> Decided:
    def decide(session: Session, wait: Wait) -> tuple[str | None, Any]:
        return waits.reject(session, wait, reason, by), reason
    return _decide(conn, run_id, APPROVAL, which, decide, "rejected")


def revise(conn: Connection, run_id: str, *, feedback: str, by: str) -> Decided:
    """Send build ``run_id``'s plan back to its planner with ``feedback``."""
    def decide(session: Session, wait: Wait) -> tuple[str | None, Any]:
        return waits.revise(session, wait, feedback, by), feedback
    return _decide(conn, run_id, APPROVAL, None, decide, "revised")


def _decide(conn: Connection, run_id: str, kind: str, which: str | None,
            decide: Callable[[Session, Wait], tuple[str | None, Any]], state: str) -> Decided:
    ctx = client_context(conn)

    def txn() -> tuple[Decided, str | None, Any]:
        with transaction(conn.endpoints.database_url) as session:
            if session.get(PipelineRun, run_id) is None:
                raise RunNotFound(run_id)
            wait = waits.find_open(session, run_id, kind, which)
            # the run's row first, as the planner and a cancel take it before its
            # attempts' rows: this never waits for a row a cancel holds, nor it for ours
            session.execute(select(PipelineRun.id).where(PipelineRun.id == wait.run_id)
                            .with_for_update())
            moved, value = decide(session, wait)
            out = advance_in(session, ctx, moved) if moved is not None else None
            return Decided(wait.id, kind, wait.run_id, wait.step_id, state, value), moved, out

    done, moved, out = _outlasting(conn, txn, f"deciding a wait of run {run_id}")
    if moved is not None and out is not None:
        send_outcome(conn.app, ctx, moved, out)
    return done


def _outlasting(conn: Connection, fn: Callable[[], T], what: str) -> T:
    return through_outage(fn, limit_s=conn.settings.database_outage_s, what=what)
