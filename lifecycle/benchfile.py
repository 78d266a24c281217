"""A skill's benchmarks.json: its human-readable window onto PostgreSQL's run history.

The file's runs (the last 20) and aggregates are recomputed from the database under a
file lock each time, read and write alike, so many items finishing at once never lose an
update: the last writer read the database after every earlier one's commit.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from filelock import FileLock
from sqlalchemy import bindparam, func, or_, select
from sqlalchemy.orm import Session

from lifecycle.run_costs import Usage, run_usage
from shared.atomic import write_text
from shared.db import skill_stats
from shared.db.models import PipelineRun, StepRun
from shared.folderhash import remember_tests
from shared.skill import BENCHMARKS, Skill
from shared.skillfiles import RUN_WINDOW
from shared.states import RunState, StepState

# A cancelled run or attempt is in the window (success false, its error says so, notes
# "cancelled"), not in the aggregates: the user stopped it, the skill did not fail. An
# attempt cancelled before it started never ran, and one a retry reused (the route says
# so, lifecycle/retry.py) is the original run's, already listed.
_FINAL_STEPS = (StepState.SUCCEEDED, StepState.FAILED, StepState.SKIPPED, StepState.CANCELLED)
_FINAL_RUNS = tuple(s for s in RunState if s.terminal)
REUSED_ROUTE = "reused from %"


def _iso(value: Any) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value is not None else None


def _test_id(triggered_by: str | None) -> str | None:
    """`skillq test` starts a case's run as triggered by ``test:<case id>``."""
    if triggered_by and triggered_by.startswith("test:"):
        return triggered_by.removeprefix("test:")
    return None


def _cancelled(state: str) -> dict[str, str]:
    # benchmarks.json's run entries have no state field (shared/skillfiles.py RunEntry)
    return {"notes": "cancelled"} if state == "cancelled" else {}


_WINDOW_COLUMNS = (StepRun.id, StepRun.finished_at, StepRun.source, StepRun.daemon,
                   StepRun.worker, StepRun.duration_ms, StepRun.cost_usd, StepRun.tokens_in,
                   StepRun.tokens_out, StepRun.state, StepRun.error, StepRun.input_hash,
                   StepRun.version, StepRun.cache_hit)


def _leaf_window() -> Any:
    final = StepRun.state.in_([s.value for s in _FINAL_STEPS])
    # The window's columns only: an attempt's outputs and output tails stay unread.
    return (select(*_WINDOW_COLUMNS, PipelineRun.skill.label("parent"),
                   PipelineRun.triggered_by.label("by"),
                   PipelineRun.parent_step_run_id.label("called_from"))
            .join(PipelineRun, PipelineRun.id == StepRun.run_id)
            # finished_at IS NOT NULL: the index's backward scan starts at the newest
            # finished row instead of wading through a wide fan-out's pending ones (NULLs
            # sort first).
            .where(StepRun.skill == bindparam("skill"), final,
                   StepRun.finished_at.is_not(None),
                   or_(StepRun.state != StepState.CANCELLED.value,
                       StepRun.started_at.is_not(None)),
                   or_(StepRun.route.is_(None), StepRun.route.not_like(REUSED_ROUTE)))
            .order_by(StepRun.finished_at.desc()).limit(RUN_WINDOW))


_LEAF_WINDOW = _leaf_window()  # built once: every settled step refreshes its window


def _leaf_trigger(row: Any, skill: str) -> str | None:
    """The skill that started a leaf attempt, None when a person or a schedule did."""
    parent: str = row.parent
    if parent != skill:
        return parent  # a step of an orchestrator's run
    # Its own run, started by another skill's step (an agent's execute_skill): that run
    # names the calling skill in triggered_by, as PostgreSQL records it.
    by: str | None = row.by
    return by if row.called_from is not None else None


def _leaf_runs(session: Session, skill: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    rows = session.execute(_LEAF_WINDOW, {"skill": skill}).all()
    # A case's id only on the skill's own run (a step of a tested orchestrator is not
    # that case).
    runs = [{"run_id": r.id, "test_id": _test_id(r.by) if r.parent == skill else None,
             "timestamp": _iso(r.finished_at),
             "source": r.source, "daemon_id": r.daemon or r.worker,
             "duration_ms": round(r.duration_ms or 0.0, 1), "cost_usd": r.cost_usd,
             "tokens": {"input": r.tokens_in, "output": r.tokens_out},
             "success": r.state == StepState.SUCCEEDED, "error": r.error,
             **_cancelled(r.state),
             "triggered_by": _leaf_trigger(r, skill),
             "input_hash": r.input_hash, "version": r.version, "cache_hit": r.cache_hit}
            for r in reversed(rows)]
    return runs, _aggregates(skill_stats.read(session, skill, skill_stats.STEP))


def _pipeline_runs(session: Session, skill: str) -> tuple[list[dict[str, Any]],
                                                          dict[str, Any]]:
    final = PipelineRun.state.in_([s.value for s in _FINAL_RUNS])
    duration = func.extract("epoch", PipelineRun.finished_at - PipelineRun.started_at) * 1000
    rows = session.execute(
        select(PipelineRun, duration).where(PipelineRun.skill == skill, final,
                                            PipelineRun.finished_at.is_not(None))
        .order_by(PipelineRun.finished_at.desc()).limit(RUN_WINDOW)).all()
    costs = run_usage(session, [r.id for r, _ in rows])
    none = Usage()
    runs = [{"run_id": r.id, "test_id": _test_id(r.triggered_by),
             "timestamp": _iso(r.finished_at), "source": r.source, "daemon_id": None,
             "duration_ms": round(float(ms or 0), 1),
             "cost_usd": costs.get(r.id, none).cost_usd,
             "tokens": {"input": costs.get(r.id, none).tokens_in,
                        "output": costs.get(r.id, none).tokens_out},
             "success": r.state == RunState.SUCCEEDED, "error": r.error,
             **_cancelled(r.state),
             "triggered_by": r.triggered_by, "input_hash": r.input_hash,
             "version": r.version, "cache_hit": False}
            for r, ms in reversed(rows)]
    return runs, _aggregates(skill_stats.read(session, skill, skill_stats.PIPELINE))


def _aggregates(totals: dict[str, Any]) -> dict[str, Any]:
    # Running totals (shared/db/skill_stats.py): one row read, however long the history.
    return {**totals, "last_run": _iso(totals["last_run"])}


def refresh(session: Session, skill: Skill, locks: Path) -> Path:
    """Rewrite ``skill``'s benchmarks.json runs and aggregates from the database.

    The window is read under the file's lock: a writer that read the database before
    another's commit cannot then write over that one's newer file."""
    path = skill.folder / BENCHMARKS
    locks.mkdir(parents=True, exist_ok=True)
    with FileLock(str(locks / f"{skill.name}.benchmarks.lock"), timeout=60):
        runs, aggregates = (_pipeline_runs if skill.manifest.is_orchestrator
                            else _leaf_runs)(session, skill.name)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            data = {}
        except (UnicodeDecodeError, json.JSONDecodeError):
            return path  # the user's broken file is theirs to fix; never overwrite it
        if not isinstance(data, dict):
            return path
        data.setdefault("skill", skill.name)
        data["version"] = skill.manifest.version
        data.setdefault("tests", [])
        data["runs"] = runs
        data["aggregates"] = aggregates
        text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
        write_text(path, text, durable=False)  # a window onto PostgreSQL, rebuilt each time
        remember_tests(path, data, len(text.encode("utf-8")))
    return path
