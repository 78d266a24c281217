"""The dashboard's own reads (repository functions: each takes the session, the caller
owns the transaction). Everything else it shows comes from the modules that own it:
orchestrator/history.py (a run's tree), versions.py, testing.py, shared/notes.py,
shared/published.py, orchestrator/library/ and orchestrator/schedules/.

Every list is a keyset page over an index (migration 0007).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence, Set
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, and_, or_, select, true, tuple_
from sqlalchemy.orm import Session

from lifecycle.run_costs import Usage, run_usage
from orchestrator.dashboard.paging import Page, page_of, parse_time_cursor, time_cursor
from orchestrator.library.history import tombstones
from shared.db.daemon_models import Daemon, DaemonWorker
from shared.db.library_models import LibrarySkill
from shared.db.models import PipelineRun, SkillStats, StepRun
from shared.db.notes_models import ImprovementNote
from shared.db.schedule_models import Schedule
from shared.states import RunState, StepState

TREND_POINTS = 200  # the newest finished runs a trend chart plots


# -- runs -------------------------------------------------------------------------------

def skill_runs_filter(session: Session, vault: str, skill: str) -> ColumnElement[bool]:
    """The runs of the live skill ``skill`` of ``vault``: those since the last deletion
    of a skill of that name (orchestrator/library/history.py draws the same line)."""
    parts = [PipelineRun.skill == skill, PipelineRun.vault == vault]
    gone = tombstones(session, vault, skill)
    if gone and gone[0].deleted_at is not None:
        parts.append(PipelineRun.created_at >= gone[0].deleted_at)
    return and_(*parts)


def runs_page(session: Session, *, where: ColumnElement[bool] | None, after: str | None,
              limit: int, top_level: bool) -> Page[PipelineRun]:
    """Runs newest first; ``top_level`` leaves out nested orchestrators' runs."""
    query = select(PipelineRun).where(where if where is not None else true())
    if top_level:
        query = query.where(PipelineRun.parent_step_run_id.is_(None))
    if after:
        at, run_id = parse_time_cursor(after)
        query = query.where(tuple_(PipelineRun.created_at, PipelineRun.id) < (at, run_id))
    rows = session.scalars(query.order_by(PipelineRun.created_at.desc(),
                                          PipelineRun.id.desc()).limit(limit + 1)).all()
    return page_of(rows, limit, lambda r: time_cursor(r.created_at, r.id))


def run_costs(session: Session, run_ids: Iterable[str]) -> dict[str, float]:
    """Each run's cost over its tree (``run_usage``)."""
    return {run_id: u.cost_usd for run_id, u in run_usage(session, run_ids).items()}


def duration_ms(run: PipelineRun) -> float | None:
    if run.started_at is None or run.finished_at is None:
        return None
    return (run.finished_at - run.started_at).total_seconds() * 1000


@dataclass(frozen=True)
class TrendPoint:
    run_id: str
    version: int
    state: str
    finished_at: datetime
    duration_ms: float | None
    cost_usd: float
    tokens_in: int = 0
    tokens_out: int = 0


def trend_points(session: Session, where: ColumnElement[bool], limit: int = TREND_POINTS
                 ) -> list[TrendPoint]:
    """The newest ``limit`` finished runs, oldest first (ix_pipeline_runs_skill_finished)."""
    ended = [RunState.SUCCEEDED.value, RunState.FAILED.value]
    rows = list(session.scalars(select(PipelineRun).where(
        where, PipelineRun.state.in_(ended), PipelineRun.finished_at.is_not(None))
        .order_by(PipelineRun.finished_at.desc()).limit(limit)).all())
    usage = run_usage(session, [r.id for r in rows])
    return [TrendPoint(r.id, r.version, r.state, r.finished_at or r.created_at,
                       duration_ms(r), u.cost_usd, u.tokens_in, u.tokens_out)
            for r in reversed(rows) for u in [usage.get(r.id, Usage())]]


def failed_attempts(steps: Sequence[StepRun]) -> list[StepRun]:
    """Attempts that failed for good: failed ones, and a lost one given up with a note."""
    return [s for s in steps if s.state == StepState.FAILED
            or (s.state == StepState.LOST and s.note_id is not None)]


def notes_for_attempts(session: Session, attempts: Sequence[StepRun]
                       ) -> dict[str, list[ImprovementNote]]:
    """Step-run id -> the note its failure was counted on (step_runs.note_id).

    A note aggregates every repeat of one failure of a step and keeps only the latest
    run's id, so matching by (skill, version, step) would show this run another run's
    note. An attempt recorded before the link existed (migration 0008) shows a note
    only when the note's own run is this attempt's run.
    """
    if not attempts:
        return {}
    linked = {a.note_id for a in attempts if a.note_id is not None}
    legacy = [a for a in attempts if a.note_id is None]
    found: list[ColumnElement[bool]] = [ImprovementNote.id.in_(linked)] if linked else []
    if legacy:  # narrowed by ix_improvement_notes_skill_status, then by run
        found.append(and_(ImprovementNote.skill.in_({a.skill for a in legacy}),
                          ImprovementNote.run_id.in_({a.run_id for a in legacy})))
    if not found:
        return {a.id: [] for a in attempts}
    notes = session.scalars(select(ImprovementNote).where(or_(*found))
                            .order_by(ImprovementNote.last_seen.desc())).all()
    return {a.id: [n for n in notes if n.id == a.note_id] if a.note_id is not None else
            [n for n in notes if (n.run_id, n.skill, n.version, n.step_id)
             == (a.run_id, a.skill, a.version, a.step_id)]
            for a in attempts}


# -- skills -------------------------------------------------------------------------------

@dataclass(frozen=True)
class SkillTotals:
    runs: int = 0
    success_rate: float | None = None
    avg_duration_ms: float | None = None
    avg_cost_usd: float | None = None
    last_run: datetime | None = None


def skill_totals(session: Session, names: Sequence[str], orchestrators: Set[str]
                 ) -> dict[str, SkillTotals]:
    """Runs, success rate, average duration and cost, last run, from the running totals
    (shared/db/skill_stats.py); the success rate over production runs only.

    Counted once each: an orchestrator's runs are its pipeline runs (its own and those
    nested under another's step). A leaf's are its settled step attempts, as a step of
    any pipeline or run directly: a leaf run directly is a pipeline_runs row plus one
    step_runs row of the same skill, so adding its pipeline runs would count it twice.
    (A direct run refused before its step started ran nothing of the leaf and is not
    among them.)
    """
    rows = session.scalars(select(SkillStats).where(SkillStats.skill.in_(list(names)))).all()
    by: dict[str, dict[str, SkillStats]] = {}
    for row in rows:
        by.setdefault(row.skill, {})[row.kind] = row
    found = {}
    for name, kinds in by.items():
        pipe, step = kinds.get("pipeline"), kinds.get("step")
        cost = step.cost_usd_sum / step.runs if step and step.runs else None
        counted = pipe if name in orchestrators else step
        if counted is None or not counted.runs:
            found[name] = SkillTotals(avg_cost_usd=cost)
            continue
        found[name] = SkillTotals(
            runs=int(counted.runs),
            success_rate=counted.prod_successes / counted.prod_runs
            if counted.prod_runs else None,
            avg_duration_ms=counted.duration_ms_sum / counted.duration_n
            if counted.duration_n else None,
            avg_cost_usd=cost, last_run=counted.last_run)
    return found


def deleted_skills(session: Session, vault: str, after: str | None, limit: int
                   ) -> Page[LibrarySkill]:
    """Tombstones of this vault, most recently deleted first (ix_library_skills_vault_slug
    narrows to the vault; a vault holds hundreds of skills, not millions)."""
    query = select(LibrarySkill).where(LibrarySkill.vault == vault,
                                       LibrarySkill.deleted_at.is_not(None))
    if after:
        at, row_id = parse_time_cursor(after)
        query = query.where(tuple_(LibrarySkill.deleted_at, LibrarySkill.id) < (at, row_id))
    rows = session.scalars(query.order_by(LibrarySkill.deleted_at.desc(),
                                          LibrarySkill.id.desc()).limit(limit + 1)).all()
    return page_of(rows, limit, lambda r: time_cursor(r.deleted_at or r.created_at, r.id))


# -- notes --------------------------------------------------------------------------------

NOTE_STATUSES = ("open", "wontfix", "dismissed", "resolved")


def notes_page(session: Session, *, status: str | None, skill: str | None, after: str | None,
               limit: int) -> Page[ImprovementNote]:
    """Notes most recently seen first; ``status`` None for every status."""
    query = select(ImprovementNote)
    if status is not None:
        query = query.where(ImprovementNote.status == status)
    if skill:
        query = query.where(ImprovementNote.skill == skill)
    if after:
        at, note_id = parse_time_cursor(after)
        query = query.where(tuple_(ImprovementNote.last_seen, ImprovementNote.id)
                            < (at, int(note_id) if note_id.isdigit() else 0))
    rows = session.scalars(query.order_by(ImprovementNote.last_seen.desc(),
                                          ImprovementNote.id.desc()).limit(limit + 1)).all()
    return page_of(rows, limit, lambda n: time_cursor(n.last_seen, n.id))


# -- daemons and schedules ---------------------------------------------------------------

@dataclass(frozen=True)
class DaemonView:
    """One daemon as `skillq daemons` shows it (orchestrator/cli/daemon_cmds.py): online
    when one of its workers has sent a heartbeat within daemon_offline_after_s."""

    daemon: Daemon
    online: bool
    queues: list[str]
    workers: list[str]
    software: list[str]


def daemons_page(session: Session, *, offline_after_s: float, after: str | None,
                 limit: int, now: datetime | None = None) -> Page[DaemonView]:
    cutoff = (now or datetime.now(UTC)) - timedelta(seconds=offline_after_s)
    query = select(Daemon)
    if after:
        query = query.where(Daemon.name > after)
    rows = session.scalars(query.order_by(Daemon.name).limit(limit + 1)).all()
    names = [d.name for d in rows[:limit]]
    workers = session.scalars(select(DaemonWorker).where(DaemonWorker.daemon.in_(names))).all()
    views = []
    for d in rows:
        live = [w for w in workers if w.daemon == d.name and w.heartbeat_at >= cutoff]
        views.append(DaemonView(d, bool(live),
                                sorted({q for w in live for q in w.queues if "@" not in q}),
                                sorted(w.node for w in live),
                                sorted(k for k, v in d.software.items() if v)))
    return page_of(views, limit, lambda v: v.daemon.name)


@dataclass(frozen=True)
class ScheduleRow:
    schedule: Schedule
    last_run_state: str | None


def schedules_page(session: Session, *, after: str | None, limit: int) -> Page[ScheduleRow]:
    """Schedules by id (its primary key), with their last run's state."""
    query = (select(Schedule, PipelineRun.state)
             .outerjoin(PipelineRun, PipelineRun.id == Schedule.last_run_id))
    if after and after.isdigit():
        query = query.where(Schedule.id > int(after))
    rows = [ScheduleRow(s, state) for s, state in
            session.execute(query.order_by(Schedule.id).limit(limit + 1)).all()]
    return page_of(rows, limit, lambda r: str(r.schedule.id))


def as_json_text(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)
