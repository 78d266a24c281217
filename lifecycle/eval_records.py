"""Evals as recorded (shared/db/eval_models.py): written once, when an eval ends, and read
back by `skillq bench --compare` and the dashboard. The caller owns the transaction."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from shared.db.eval_models import EvalRecord, EvalResult

PUBLISHED, DRAFT, BARE = "published", "draft", "bare"  # EvalResult.form


@dataclass(frozen=True, slots=True)
class ResultRow:
    """One judged run, as an eval hands it over to be recorded."""

    arm: str  # "skill" | "baseline"
    skill: str
    version: int
    form: str  # PUBLISHED | DRAFT | BARE
    case_id: str
    run_id: str
    passed: bool
    checks: Sequence[tuple[str, bool]]
    problems: Sequence[str]
    duration_ms: float | None
    tokens: int
    cost_usd: float


def record_eval(session: Session, *, eval_id: str, skill: str, subject: str,
                baseline: str | None, runs_per_case: int, pass_rate: float | None,
                baseline_pass_rate: float | None, spent_usd: float, stopped: str | None,
                report: Mapping[str, Any], results: Sequence[ResultRow]) -> None:
    session.add(EvalRecord(id=eval_id, skill=skill, subject=subject, baseline=baseline,
                           runs_per_case=runs_per_case, pass_rate=pass_rate,
                           baseline_pass_rate=baseline_pass_rate, spent_usd=spent_usd,
                           stopped=stopped, report=dict(report)))
    session.flush()  # the eval's row before the rows that refer to it
    session.add_all(EvalResult(
        eval_id=eval_id, arm=r.arm, skill=r.skill, version=r.version, form=r.form,
        case_id=r.case_id, run_id=r.run_id, passed=r.passed,
        checks=[{"assertion": a, "passed": p} for a, p in r.checks],
        problems=list(r.problems), duration_ms=r.duration_ms, tokens=r.tokens,
        cost_usd=r.cost_usd) for r in results)


def latest_evals(session: Session, skill: str, limit: int = 10) -> Sequence[EvalRecord]:
    """The skill's evals, newest first."""
    return session.scalars(select(EvalRecord).where(EvalRecord.skill == skill)
                           .order_by(EvalRecord.created_at.desc(), EvalRecord.id)
                           .limit(limit)).all()


def version_results(session: Session, skill: str, version: int) -> Sequence[EvalResult]:
    """Every eval run of the skill's published ``version`` (either arm), oldest first:
    the same cases, whichever eval ran them."""
    return session.scalars(select(EvalResult).where(
        EvalResult.skill == skill, EvalResult.version == version,
        EvalResult.form == PUBLISHED).order_by(EvalResult.id)).all()
