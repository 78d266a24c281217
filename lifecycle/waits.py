"""Waits for a person: what a step asks (an agent's question, an approval step's
decision), and a person's answer, which puts the waiting step back in its queue.

A step that asks opens a wait (``ask``, its own transaction, committed before the step
is recorded waiting) and ends its attempt; the step holds no worker slot while it
waits. A decision (``answer``, ``approve``, ``reject``) or the deadline (``expire``)
closes the wait and resumes the step, which runs again and finds it decided. The caller
owns the transaction, then advances the run the decision names.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from lifecycle import transitions
from shared.attempt_id import AttemptId
from shared.db.models import PipelineRun, StepRun
from shared.db.wait_models import APPROVAL, QUESTION, Wait
from shared.errors import InputError, WaitError
from shared.inputs import parse_cli_inputs, resolve_inputs
from shared.manifest import BUILD_SKILL, InputSpec, Manifest
from shared.states import StepState, WaitState

APPROVAL_KEY = "approval"  # an approval's key: its step item's prefix, then this


@dataclass(frozen=True, slots=True)
class Asked:
    """What a step asks a person."""

    kind: str  # QUESTION | APPROVAL
    prompt: str
    choices: Sequence[str] = ()
    free_text: bool = True
    default: Any = None
    shown: Mapping[str, Any] = field(default_factory=dict)
    form: Sequence[Mapping[str, Any]] = ()  # an approval's inputs (InputSpec fields)
    timeout_s: float | None = None
    on_timeout: str = "reject"


def ask(session: Session, key: str, attempt: AttemptId, skill: str, asked: Asked,
        now: datetime | None = None) -> Wait:
    """The wait ``key`` names: as an earlier attempt of the step opened it, else new."""
    found = session.scalar(select(Wait).where(Wait.key == key))
    if found is not None:
        return found
    now = now or datetime.now(UTC)
    return transitions.open_wait(
        session, run_id=attempt.run_id, step_id=attempt.step_id, item_index=attempt.item,
        key=key, kind=asked.kind, skill=skill, prompt=asked.prompt,
        choices=list(asked.choices), free_text=asked.free_text, default=asked.default,
        shown=dict(asked.shown), form=[dict(f) for f in asked.form],
        deadline_at=now + timedelta(seconds=asked.timeout_s) if asked.timeout_s else None,
        on_timeout=asked.on_timeout)


# What ``triggered_by`` says of a run a person started and can answer for: the CLI (and
# `skillq try`), the dashboard, an MCP client, a retry. A schedule's run, a test case's,
# never waits for anyone.
ATTENDED = frozenset({"cli", "try", "dashboard", "mcp", "retry"})


def top_run(session: Session, run: PipelineRun) -> PipelineRun:
    """The run a person (or a schedule) started, of which ``run`` is a part: itself, or
    the run whose step started it, to any depth."""
    top = run
    while top.parent_step_run_id is not None:
        parent = session.scalar(select(PipelineRun).join(
            StepRun, StepRun.run_id == PipelineRun.id).where(
            StepRun.id == top.parent_step_run_id))
        if parent is None:
            break
        top = parent
    return top


def may_ask(top_trigger: str | None, interactive: bool) -> bool:
    """Whether an agent step may ask a person: someone started its top run (a
    sub-skill's run asks for the run that started it), or its skill says
    ``interactive: true`` and no schedule started it (a schedule's run never waits)."""
    if top_trigger in ATTENDED:
        return True
    return interactive and not str(top_trigger or "").startswith("schedule:")


def parse_pairs(wait: Wait, pairs: Sequence[str]) -> dict[str, Any]:
    """``--input NAME=VALUE`` pairs typed by an approval's form."""
    try:
        return parse_cli_inputs(form_manifest(wait), pairs)
    except InputError as exc:
        raise WaitError(f"approval #{wait.id} at step {wait.step_id}: {exc}") from None


def form_manifest(wait: Wait) -> Manifest:
    """An approval's inputs as a skill's, so they are parsed and checked as a run's are;
    a default the planner resolved from an earlier step is its default."""
    defaults = wait.default or {}
    specs = [InputSpec.model_validate({**f, **({"default": defaults[f["name"]]}
                                               if f["name"] in defaults else {})})
             for f in wait.form]
    return Manifest(name=f"approval {wait.step_id}", description=wait.prompt,
                    inputs=tuple(specs))


def open_waits(session: Session, run_ids: Sequence[str] | None = None) -> list[Wait]:
    """Every open wait, oldest first (of ``run_ids`` when given)."""
    query = select(Wait).where(Wait.state == WaitState.OPEN.value)
    if run_ids is not None:
        query = query.where(Wait.run_id.in_(list(run_ids)))
    return list(session.scalars(query.order_by(Wait.created_at, Wait.id)))


def find_open(session: Session, run_id: str, kind: str, which: str | None = None) -> Wait:
    """The open wait of ``kind`` in run ``run_id`` (or a run it started): the one there
    is, or ``which`` of several (its number in `skillq inbox`, or its step id)."""
    runs = run_tree(session, run_id)
    found = [w for w in open_waits(session, runs) if w.kind == kind]
    noun = "question" if kind == QUESTION else "approval"
    if not found:
        raise WaitError(f"run {run_id} has no open {noun}; `skillq inbox` lists what is "
                        "waiting")
    if which is None:
        if len(found) > 1:
            raise WaitError(f"run {run_id} has {len(found)} open {noun}s ("
                            + ", ".join(f"#{w.id} at step {w.step_id}" for w in found)
                            + "); name one: the #number or the step id")
        return found[0]
    wanted = which.removeprefix("#")
    for wait in found:
        if str(wait.id) == wanted or wait.step_id == which:
            return wait
    raise WaitError(f"run {run_id} has no open {noun} '{which}'; open: "
                    + ", ".join(f"#{w.id} at step {w.step_id}" for w in found))


def run_tree(session: Session, run_id: str) -> list[str]:
    """The run and the runs its steps started, to any depth (a question may come from an
    agent step of a sub-skill's run)."""
    runs, frontier = [run_id], [run_id]
    while frontier:
        children = list(session.scalars(select(PipelineRun.id).where(
            PipelineRun.parent_step_run_id.in_(
                select(StepRun.id).where(StepRun.run_id.in_(frontier))))))
        runs += children
        frontier = children
    return runs


def answer_value(wait: Wait, text: str | None, choice: int | None) -> str:
    """The answer a question takes: its choice ``choice`` (from 1), or ``text`` (one of
    its choices, when it takes no free text)."""
    choices = list(wait.choices or [])
    if choice is not None:
        if not 1 <= choice <= len(choices):
            raise WaitError(f"question #{wait.id} has {len(choices)} choice(s); "
                            f"--choice takes 1 to {len(choices)}" if choices else
                            f"question #{wait.id} offers no choices; answer with text")
        return str(choices[choice - 1])
    if text is None or not text.strip():
        raise WaitError(f"question #{wait.id}: give an answer (text, or --choice N)")
    if choices and not wait.free_text and text not in choices:
        raise WaitError(f"question #{wait.id} takes one of its choices: "
                        + "; ".join(f"{i}. {c}" for i, c in enumerate(choices, 1))
                        + " (answer with --choice N)")
    return text


def answer(session: Session, wait: Wait, value: str, by: str) -> str | None:
    """Answer an open question; the run to advance (None: nothing moves yet)."""
    return _decided(session, wait, WaitState.ANSWERED, answer=value, by=by)


def approve(session: Session, wait: Wait, given: Mapping[str, Any], by: str) -> str | None:
    """Approve, with the approver's inputs (checked against its form; defaults fill the
    rest); the run to advance."""
    try:
        values = resolve_inputs(form_manifest(wait), given, origin="approval", session=session)
    except InputError as exc:
        raise WaitError(f"approval #{wait.id} at step {wait.step_id}: {exc}") from None
    return _decided(session, wait, WaitState.APPROVED, answer=values, by=by)


def reject(session: Session, wait: Wait, reason: str, by: str) -> str | None:
    if not reason.strip():
        raise WaitError(f"approval #{wait.id}: say why it is rejected (--reason TEXT)")
    return _decided(session, wait, WaitState.REJECTED, reason=reason, by=by)


def revise(session: Session, wait: Wait, feedback: str, by: str) -> str | None:
    """Send a build's plan back to its planner with ``feedback``: its approval is
    answered, neither approved nor rejected (lifecycle/builds.py reads it)."""
    if wait.skill != BUILD_SKILL:
        raise WaitError(f"approval #{wait.id} is not a build's plan: approve or reject it")
    if not feedback.strip():
        raise WaitError(f"approval #{wait.id}: say what to change in the plan")
    return _decided(session, wait, WaitState.ANSWERED, answer={"revise": feedback}, by=by)


def _decided(session: Session, wait: Wait, new: WaitState, *, by: str, answer: Any = None,
             reason: str | None = None) -> str | None:
    decided = transitions.decide(session, wait.id, new, answer=answer, reason=reason, by=by)
    if decided is None:
        raise WaitError(f"{wait.kind} #{wait.id} was decided meanwhile; `skillq show "
                        f"{wait.run_id}` says how")
    return _resume_step(session, decided)


def _resume_step(session: Session, wait: Wait) -> str | None:
    """The step item waiting on ``wait`` goes back to its queue if nothing else holds it;
    its run, to advance (None when it still waits, or was not waiting)."""
    row = session.scalar(select(StepRun).where(
        StepRun.run_id == wait.run_id, StepRun.step_id == wait.step_id,
        StepRun.item_index == wait.item_index, StepRun.state == StepState.WAITING.value))
    if row is None:  # still running: its record finds the wait decided (wait_on)
        return None
    return wait.run_id if transitions.resume_if_done(session, row.id) else None


def expire(session: Session, run_id: str, now: datetime) -> tuple[bool, datetime | None]:
    """The run's open waits past their deadline closed as their timeout says (a
    question: timed out, its default to hold if it has one; an approval: rejected,
    or approved where it says so), and a waiting step with nothing left to wait for
    resumed; whether a step was resumed, and the next deadline."""
    resumed, next_due = False, None
    for wait in open_waits(session, [run_id]):
        if wait.deadline_at is None:
            continue
        if wait.deadline_at > now:
            next_due = wait.deadline_at if next_due is None else min(next_due, wait.deadline_at)
            continue
        approves = wait.kind == APPROVAL and wait.on_timeout == "approve"
        new = WaitState.APPROVED if approves else WaitState.TIMED_OUT
        value = (wait.default or {}) if approves else None
        decided = transitions.decide(session, wait.id, new, answer=value, by="timeout",
                                     reason="no decision by its deadline", now=now)
        if decided is not None and _resume_step(session, decided) is not None:
            resumed = True
    # A decision that came while its step was still being recorded waiting found it
    # running, and the record found the wait still open: nobody woke it. Caught here.
    for row_id in session.scalars(select(StepRun.id).where(
            StepRun.run_id == run_id, StepRun.state == StepState.WAITING.value)):
        resumed |= transitions.resume_if_done(session, row_id, now=now)
    return resumed, next_due
