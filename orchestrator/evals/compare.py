"""`skillq bench NAME --compare A B`'s eval view: the recorded eval runs of two published
versions (lifecycle/eval_records.py), case by case, side by side, with B's difference
from A and its 95% interval. It reads what evals recorded; it runs nothing."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from lifecycle.eval_records import version_results
from orchestrator.evals.report import interval_json
from shared.db.eval_models import EvalResult
from shared.eval_stats import Interval, mean_difference, rate_difference

ALL = "(all cases)"


@dataclass(frozen=True, slots=True)
class Side:
    runs: int
    passed: int
    cost_usd: float | None  # mean

    @property
    def rate(self) -> float | None:
        return self.passed / self.runs if self.runs else None


@dataclass(frozen=True, slots=True)
class CaseRow:
    case: str
    a: Side
    b: Side
    pass_rate: Interval | None  # b - a, when both ran it
    cost_usd: Interval | None


def _side(rows: Sequence[EvalResult]) -> Side:
    costs = [r.cost_usd for r in rows]
    return Side(len(rows), sum(r.passed for r in rows),
                sum(costs) / len(costs) if costs else None)


def _row(case: str, a: Sequence[EvalResult], b: Sequence[EvalResult]) -> CaseRow:
    both = bool(a) and bool(b)
    return CaseRow(case, _side(a), _side(b),
                   rate_difference(sum(r.passed for r in b), len(b),
                                   sum(r.passed for r in a), len(a)) if both else None,
                   mean_difference([r.cost_usd for r in b], [r.cost_usd for r in a])
                   if both else None)


def compare_evals(session: Session, skill: str, a: int, b: int) -> list[CaseRow]:
    """Each case either version's evals ran, then all cases both ran; [] when neither
    version was evaluated."""
    ra, rb = version_results(session, skill, a), version_results(session, skill, b)
    cases = sorted({r.case_id for r in (*ra, *rb)})
    rows = [_row(c, [r for r in ra if r.case_id == c], [r for r in rb if r.case_id == c])
            for c in cases]
    shared = {r.case for r in rows if r.pass_rate is not None}
    if len(rows) > 1 and shared:
        rows.append(_row(ALL, [r for r in ra if r.case_id in shared],
                         [r for r in rb if r.case_id in shared]))
    return rows


def side_json(side: Side) -> dict[str, Any]:
    return {"runs": side.runs, "passed": side.passed, "pass_rate": side.rate,
            "cost_usd_mean": side.cost_usd}


def row_json(row: CaseRow) -> dict[str, Any]:
    return {"case": row.case, "a": side_json(row.a), "b": side_json(row.b),
            "pass_rate_difference": interval_json(row.pass_rate),
            "cost_usd_difference": interval_json(row.cost_usd)}
