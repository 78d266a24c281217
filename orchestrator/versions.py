"""How each version of a skill has run, from the records (repository functions).

A leaf's runs are its step attempts that settled (succeeded, failed, skipped: a retried
attempt is not a run of its own); an orchestrator's are its pipeline runs that ended,
timed from start to end, costed by its own steps. Durations leave out cache hits, which
took no time and would flatter the version that happened to be cached.

A success rate is over production runs only: a test case meant to fail is not a failed
run. Test cases are counted by whether they met their expectation (test_results), as
each version's test pass rate, which is also the success rate asked for with
``source="test_window"``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import ColumnElement, case, func, select
from sqlalchemy.orm import QueryableAttribute, Session

from shared.db.models import PipelineRun, StepRun
from shared.db.notes_models import TestResult
from shared.skillfiles import RunSource
from shared.states import RunState, StepState

_FINAL_STEPS = [StepState.SUCCEEDED.value, StepState.FAILED.value, StepState.SKIPPED.value]
_FINAL_RUNS = [RunState.SUCCEEDED.value, RunState.FAILED.value]


@dataclass(frozen=True)
class VersionStats:
    version: int
    runs: int
    success_rate: float | None
    median_ms: float | None
    p90_ms: float | None
    avg_cost_usd: float | None
    total_cost_usd: float
    test_pass_rate: float | None = None  # recorded test cases that met their expectation


def no_runs(version: int) -> VersionStats:
    return VersionStats(version, 0, None, None, None, None, 0.0)


def _stats(rows: Sequence[Any]) -> dict[int, VersionStats]:
    return {int(v): VersionStats(int(v), int(n), _num(rate), _num(p50), _num(p90), _num(avg),
                                 float(total or 0.0))
            for v, n, rate, p50, p90, avg, total in rows}


def _num(value: Any) -> float | None:
    return None if value is None else float(value)


def _success(ok: ColumnElement[bool], source_col: QueryableAttribute[str],
             source: str | None) -> ColumnElement[Any]:
    """The success rate's aggregate: avg() leaves out the NULLs, so over all sources it
    is over the production rows alone (None when there are none)."""
    hit = case((ok, 1.0), else_=0.0)
    if source is None:
        return func.avg(case((source_col == RunSource.PRODUCTION.value, hit), else_=None))
    return func.avg(hit)


def _leaf(session: Session, skill: str, source: str | None) -> dict[int, VersionStats]:
    timed = case((StepRun.cache_hit, None), else_=StepRun.duration_ms)
    query = select(
        StepRun.version, func.count(),
        _success(StepRun.state == StepState.SUCCEEDED.value, StepRun.source, source),
        func.percentile_cont(0.5).within_group(timed),
        func.percentile_cont(0.9).within_group(timed),
        func.avg(StepRun.cost_usd), func.sum(StepRun.cost_usd),
    ).where(StepRun.skill == skill, StepRun.state.in_(_FINAL_STEPS))
    if source is not None:
        query = query.where(StepRun.source == source)
    return _stats(session.execute(query.group_by(StepRun.version)).all())


def _pipeline(session: Session, skill: str, source: str | None) -> dict[int, VersionStats]:
    cost = (select(StepRun.run_id, func.sum(StepRun.cost_usd).label("cost"))
            .group_by(StepRun.run_id).subquery())
    ms = func.extract("epoch", PipelineRun.finished_at - PipelineRun.started_at) * 1000
    run_cost = func.coalesce(cost.c.cost, 0.0)
    query = select(
        PipelineRun.version, func.count(),
        _success(PipelineRun.state == RunState.SUCCEEDED.value, PipelineRun.source, source),
        func.percentile_cont(0.5).within_group(ms),
        func.percentile_cont(0.9).within_group(ms),
        func.avg(run_cost), func.sum(run_cost),
    ).outerjoin(cost, cost.c.run_id == PipelineRun.id).where(
        PipelineRun.skill == skill, PipelineRun.state.in_(_FINAL_RUNS))
    if source is not None:
        query = query.where(PipelineRun.source == source)
    return _stats(session.execute(query.group_by(PipelineRun.version)).all())


def version_stats(session: Session, skill: str, *, orchestrator: bool,
                  source: str | None = None) -> dict[int, VersionStats]:
    """Per version: runs, success rate, median and p90 duration, cost, test pass rate."""
    found = (_pipeline if orchestrator else _leaf)(session, skill, source)
    passed = case_pass_rates(session, skill)
    for version, stats in found.items():
        rate = passed.get(version)
        found[version] = replace(stats, test_pass_rate=rate, success_rate=rate
                                 if source == RunSource.TEST_WINDOW else stats.success_rate)
    return found


def case_pass_rates(session: Session, skill: str) -> dict[int, float]:
    """Per version: the share of its recorded test cases that met their expectation."""
    rows = session.execute(select(TestResult.version, func.avg(case(
        (TestResult.passed, 1.0), else_=0.0))).where(TestResult.skill == skill)
        .group_by(TestResult.version)).all()
    return {int(v): float(rate) for v, rate in rows}
