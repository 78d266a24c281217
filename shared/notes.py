"""Improvement notes: what a production failure leaves for the user, never an edit.

Repository functions: each takes the session; the caller owns the transaction (a worker
writes the note in the same transaction that records the step's final failure).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from shared.db.models import PipelineRun, StepRun
from shared.db.notes_models import LIVE_STATUSES, LIVE_WHERE, ImprovementNote
from shared.diagnosis import Failure, diagnose
from shared.errors import NoteError
from shared.secrets import redact, redact_value, values_for
from shared.skillfiles import RunSource
from shared.store import unpack
from shared.vault import open_vault

MAX_INPUT_TEXT = 2000  # a note quotes inputs to reproduce the failure, not whole documents
MAX_ERROR_TEXT = 4000
NO_NOTE_KINDS = frozenset({"nested"})  # the inner step that failed has its own note


class Status(StrEnum):
    OPEN = "open"
    DISMISSED = "dismissed"  # not a problem: a new failure opens a new note
    RESOLVED = "resolved"  # fixed: a new failure opens a new note (a regression)
    WONTFIX = "wontfix"  # known and accepted: repeats keep counting on it, quietly


@dataclass(frozen=True, slots=True)
class StepFailure:
    """A step attempt that failed for good in a production run."""

    skill: str
    version: int
    step_id: str
    pipeline: str
    run_id: str
    step_run_id: str
    error: str | None
    error_kind: str | None
    exit_code: int | None
    inputs: Any
    worker: str | None = None
    timeout_s: float | None = None
    retries: int | None = None


def _clip(value: Any) -> Any:
    if isinstance(value, str) and len(value) > MAX_INPUT_TEXT:
        return value[:MAX_INPUT_TEXT] + f"… ({len(value)} characters)"
    if isinstance(value, list):
        return [_clip(v) for v in value]
    if isinstance(value, dict):
        return {k: _clip(v) for k, v in value.items()}
    return value


def safe_inputs(inputs: Any, secrets: Mapping[str, str], declared: Iterable[str] = ()
                ) -> Any:
    """The inputs as a note may keep them: secret values and declared-secret keys hidden,
    long texts clipped, and anything not JSON shown as text."""
    try:
        value = json.loads(json.dumps(inputs, default=str))
    except (TypeError, ValueError):
        value = str(inputs)
    return _clip(redact_value(value, secrets, declared))


def leave_note(session: Session, failure: StepFailure, *, secrets: Mapping[str, str],
               declared: Iterable[str] = ()) -> int | None:
    """Record ``failure`` as an improvement note, or count it on the live note of the same
    (skill, version, step, diagnosis); the note's id. None when the failure needs no
    note of its own (a nested pipeline's failure: its inner step has one).

    ``secrets`` are the values to hide wherever they appear; ``declared`` the skill's
    `auth` names, whose input keys are hidden whole. Concurrent failures of one fan-out
    land on one note (INSERT ... ON CONFLICT on the live-note index).
    """
    if failure.error_kind in NO_NOTE_KINDS:
        return None
    found = diagnose(Failure(failure.error_kind, failure.error, failure.exit_code,
                             failure.timeout_s, failure.retries))
    error = redact(failure.error or "(no error message)", secrets)[:MAX_ERROR_TEXT]
    now = datetime.now(UTC)
    values = {
        "skill": failure.skill, "version": failure.version, "step_id": failure.step_id,
        "pipeline": failure.pipeline, "run_id": failure.run_id,
        "step_run_id": failure.step_run_id, "error": error, "error_kind": failure.error_kind,
        "exit_code": failure.exit_code,
        "inputs": safe_inputs(failure.inputs, secrets, declared),
        "diagnosis": str(found.kind), "summary": redact(found.summary, secrets),
        "suggested_fix": found.suggested_fix, "worker": failure.worker, "count": 1,
        "status": Status.OPEN.value, "first_seen": now, "last_seen": now,
    }
    stmt = insert(ImprovementNote).values(**values)
    table = ImprovementNote.__table__
    upsert = stmt.on_conflict_do_update(
        index_elements=["skill", "version", "step_id", "diagnosis"], index_where=LIVE_WHERE,
        set_={"count": table.c.count + 1, "last_seen": now, "run_id": stmt.excluded.run_id,
              "step_run_id": stmt.excluded.step_run_id, "error": stmt.excluded.error,
              "exit_code": stmt.excluded.exit_code, "inputs": stmt.excluded.inputs,
              "summary": stmt.excluded.summary, "worker": stmt.excluded.worker,
              "pipeline": stmt.excluded.pipeline},
    ).returning(table.c.id)
    note_id: int = session.execute(upsert).scalar_one()
    # The note keeps only its latest run: the failing attempt keeps the link, so each
    # run it counted shows it (the dashboard's run page) and no other run does.
    session.execute(update(StepRun).where(StepRun.id == failure.step_run_id)
                    .values(note_id=note_id).execution_options(synchronize_session=False))
    return note_id


AGENT_REPORT = "agent_report"  # the diagnosis kind of a note a model filed itself


@dataclass(frozen=True)
class AgentReport:
    """What an agent step's ``skill_improvement_note`` call says (the seed's fields)."""

    skill: str
    version: int
    step: str  # which SKILL.md step of that skill, as the model names it
    error: str
    diagnosis: str
    suggested_fix: str
    inputs: Any
    pipeline: str  # the run's own skill
    run_id: str
    step_run_id: str  # "<calling attempt>#<tool call id>": a replayed call files it once
    worker: str | None


def leave_agent_note(session: Session, report: AgentReport, *,
                     secrets: Mapping[str, str]) -> int:
    """File ``report`` as an improvement note, or count it on the live agent note of the
    same (skill, version, step); the note's id. A call already filed (its step_run_id
    seen) is not counted again."""
    seen = session.scalar(select(ImprovementNote.id).where(
        ImprovementNote.step_run_id == report.step_run_id))
    if seen is not None:
        return int(seen)
    now = datetime.now(UTC)
    values = {
        "skill": report.skill, "version": report.version, "step_id": report.step[:64],
        "pipeline": report.pipeline, "run_id": report.run_id,
        "step_run_id": report.step_run_id[:160],
        "error": redact(report.error, secrets)[:MAX_ERROR_TEXT], "error_kind": "agent_note",
        "exit_code": None, "inputs": safe_inputs(report.inputs, secrets),
        "diagnosis": AGENT_REPORT, "summary": redact(report.diagnosis, secrets),
        "suggested_fix": redact(report.suggested_fix, secrets), "worker": report.worker,
        "count": 1, "status": Status.OPEN.value, "first_seen": now, "last_seen": now,
    }
    stmt = insert(ImprovementNote).values(**values)
    table = ImprovementNote.__table__
    upsert = stmt.on_conflict_do_update(
        index_elements=["skill", "version", "step_id", "diagnosis"], index_where=LIVE_WHERE,
        set_={"count": table.c.count + 1, "last_seen": now, "run_id": stmt.excluded.run_id,
              "step_run_id": stmt.excluded.step_run_id, "error": stmt.excluded.error,
              "inputs": stmt.excluded.inputs, "summary": stmt.excluded.summary,
              "suggested_fix": stmt.excluded.suggested_fix,
              "pipeline": stmt.excluded.pipeline, "worker": stmt.excluded.worker},
    ).returning(table.c.id)
    return int(session.execute(upsert).scalar_one())


def list_notes(session: Session, skill: str | None = None, *, include_closed: bool = False,
               limit: int = 200) -> list[ImprovementNote]:
    """Newest first; open (and wontfix) only unless ``include_closed``."""
    query = select(ImprovementNote)
    if skill is not None:
        query = query.where(ImprovementNote.skill == skill)
    if not include_closed:
        query = query.where(ImprovementNote.status == Status.OPEN.value)
    query = query.order_by(ImprovementNote.last_seen.desc(), ImprovementNote.id.desc())
    return list(session.scalars(query.limit(limit)).all())


def open_counts(session: Session, skills: Iterable[str] | None = None) -> dict[str, int]:
    """Skill -> number of open notes (skills without any are left out)."""
    query = (select(ImprovementNote.skill, func.count())
             .where(ImprovementNote.status == Status.OPEN.value)
             .group_by(ImprovementNote.skill))
    if skills is not None:
        query = query.where(ImprovementNote.skill.in_(list(skills)))
    return {name: int(n) for name, n in session.execute(query).all()}


def set_status(session: Session, note_id: int, status: Status) -> ImprovementNote:
    """Close (or accept) a live note; NoteError for an unknown note or a closed one."""
    note = session.get(ImprovementNote, note_id, with_for_update=True)
    if note is None:
        raise NoteError(f"no improvement note {note_id}; `skillq notes --all` lists them")
    if note.status == status:
        return note
    if note.status not in LIVE_STATUSES:
        raise NoteError(f"note {note_id} is already {note.status}; only an open (or "
                        "wontfix) note can be dismissed, resolved or marked wontfix")
    note.status = status.value
    note.closed_at = datetime.now(UTC)
    return note


@dataclass(frozen=True, slots=True)
class SkillFacts:
    """What a note needs from the skill's manifest: read, never written."""

    auth: tuple[str, ...] = ()
    timeout_s: float | None = None
    retries: int | None = None


def skill_facts(vault_root: Path, name: str, ttl_s: float = 5.0) -> SkillFacts:
    """The skill's declared secrets and run limits, or none when this machine's vault
    does not have it (the note is still left; only names it cannot know stay shown)."""
    skill = open_vault(vault_root, ttl_s=ttl_s).skills.get(name) if vault_root.is_dir() \
        else None
    if skill is None:
        return SkillFacts()
    run = skill.manifest.run
    return SkillFacts(skill.manifest.auth, run.timeout if run else None,
                      run.retries if run else None)


def note_lost_step(session: Session, run: PipelineRun, row: StepRun) -> int | None:
    """A production step given up after its worker died too often (the planner's final
    decision on a lost attempt) leaves a note like any other final failure."""
    if run.source != RunSource.PRODUCTION:
        return None
    facts = skill_facts(Path(run.vault), row.skill)
    failure = StepFailure(
        skill=row.skill, version=row.version, step_id=row.step_id, pipeline=run.skill,
        run_id=run.id, step_run_id=row.id, error=row.error, error_kind="lost",
        exit_code=row.exit_code, inputs=unpack(session, row.inputs), worker=row.worker,
        timeout_s=facts.timeout_s, retries=facts.retries)
    return leave_note(session, failure, secrets=values_for(facts.auth), declared=facts.auth)
