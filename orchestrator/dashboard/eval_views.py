"""The skill page's evals (docs/evals.md): the latest `skillq eval` of the skill as
recorded (lifecycle/eval_records.py), case by case beside its baseline's, with the
assertions that never discriminate flagged, and the pass rate of its last evals, oldest
to newest, as a sparkline with a row of values (templates/eval_panel.html).

The report is the object `skillq eval --json` prints, read defensively: a field that is
missing or of another shape shows as "-", never as an error, and the whole report is
there too, as JSON, for the fields this page does not know yet."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from lifecycle.eval_records import latest_evals
from orchestrator.dashboard.queries import as_json_text
from shared.db.eval_models import EvalRecord

TREND_EVALS = 10  # the trend's evals, the newest
SPARK_W, SPARK_H, SPARK_PAD = 280, 64, 8  # the sparkline's box, y from 0% to 100%
BARE = "none"  # the baseline of the same requests with no skill loaded


def number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def integer(value: Any) -> int | None:
    found = number(value)
    return None if found is None else int(found)


def mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def mappings(value: Any) -> list[Mapping[str, Any]]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def text(value: Any) -> str:
    return "" if value is None else str(value)


def fixed(value: Any) -> str:
    found = number(value)
    return "-" if found is None else f"{found:.2f}"


def spread_text(value: Any, fmt: Callable[[float], str]) -> str:
    """"mean ± sd" of a {"mean", "stddev"}, or "-"."""
    m = mapping(value)
    mean, sd = number(m.get("mean")), number(m.get("stddev"))
    if mean is None:
        return "-"
    return fmt(mean) if sd is None else f"{fmt(mean)} ± {fmt(sd)}"


def _usd(v: float) -> str:
    return f"${v:.4f}"


def _ms(v: float) -> str:
    return f"{v:.0f} ms"


@dataclass(frozen=True)
class Difference:
    """The subject's figure less the baseline's, with its 95% interval when given."""

    estimate: float
    low: float | None
    high: float | None
    text: str

    @property
    def verdict(self) -> str:
        """"higher" or "lower" when the interval leaves out 0, else ""."""
        if self.low is not None and self.low > 0:
            return "higher"
        if self.high is not None and self.high < 0:
            return "lower"
        return ""


def difference(value: Any, unit: str, fmt: Callable[[float], str]) -> Difference | None:
    m = mapping(value)
    estimate, low, high = number(m.get("estimate")), number(m.get("low")), number(m.get("high"))
    if estimate is None:
        return None
    shown = f"{fmt(estimate)} {unit}"
    if low is not None and high is not None:
        shown += f" [{fmt(low)}, {fmt(high)}]"
    return Difference(estimate, low, high, shown)


def _points(v: float) -> str:  # a difference of pass rates, in percentage points
    return f"{v * 100:+.0f}"


def _signed_usd(v: float) -> str:
    return f"{v:+.4f}"


def _signed_ms(v: float) -> str:
    return f"{v:+.0f}"


@dataclass(frozen=True)
class Flag:
    """An assertion that never discriminates (report["non_discriminating"])."""

    case: str
    assertion: str
    more: str  # any other fields of the entry, "key: value, ..."


@dataclass(frozen=True)
class CaseRow:
    case: str
    runs: int | None
    passed: int | None
    pass_rate: float | None
    pass_at: tuple[str, ...]  # for each of the eval's k, in order
    pass_hat: tuple[str, ...]
    cost: str
    duration: str
    baseline_rate: float | None
    difference: Difference | None  # of pass rates
    cost_difference: Difference | None
    duration_difference: Difference | None
    flagged: tuple[str, ...]  # its assertions that never discriminate


@dataclass(frozen=True)
class LatestEval:
    eval_id: str
    created_at: datetime
    version: str  # the skill's version the report names ("" when it names none)
    subject: str
    baseline: str | None
    runs_per_case: int
    pass_rate: float | None
    baseline_pass_rate: float | None
    spent_usd: float
    judge_usd: float | None
    stopped: str | None
    ks: tuple[str, ...]
    cases: tuple[CaseRow, ...]
    flags: tuple[Flag, ...]
    report_json: str

    @property
    def baseline_label(self) -> str:
        if self.baseline == BARE:
            return "none (the same requests, no skill loaded)"
        return self.baseline or ""

    @property
    def compared(self) -> bool:
        """A baseline ran: the table has its columns."""
        return self.baseline is not None or any(
            c.baseline_rate is not None or c.difference is not None for c in self.cases)


def _ks(report: Mapping[str, Any], cases: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    given = report.get("k")
    if isinstance(given, list) and given:
        return tuple(str(k) for k in given)
    keys = {str(k) for c in cases for field in ("pass_at_k", "pass_hat_k")
            for k in mapping(c.get(field))}
    return tuple(sorted(keys, key=lambda k: (len(k), k)))


def _flag(entry: Any) -> Flag:
    if not isinstance(entry, Mapping):
        return Flag("", text(entry), "")
    more = ", ".join(f"{k}: {v}" for k, v in entry.items() if k not in ("case", "assertion"))
    return Flag(text(entry.get("case")), text(entry.get("assertion")), more)


def latest_eval(record: EvalRecord) -> LatestEval:
    report = mapping(record.report)
    cases = mappings(report.get("cases"))
    baseline_cases = {text(c.get("case")): c for c in mappings(report.get("baseline_cases"))}
    differences = {text(d.get("case")): d for d in mappings(report.get("differences"))}
    raw_flags = report.get("non_discriminating")
    flags = tuple(_flag(e) for e in raw_flags) if isinstance(raw_flags, list) else ()
    ks = _ks(report, cases)
    by_case = {text(c.get("case")): c for c in cases}
    names = dict.fromkeys([*by_case, *baseline_cases, *differences])
    rows = []
    for name in names:
        c = by_case.get(name, {})
        at, hat = mapping(c.get("pass_at_k")), mapping(c.get("pass_hat_k"))
        d = differences.get(name, {})
        rows.append(CaseRow(
            name, integer(c.get("runs")), integer(c.get("passed")), number(c.get("pass_rate")),
            tuple(fixed(at.get(k)) for k in ks), tuple(fixed(hat.get(k)) for k in ks),
            spread_text(c.get("cost_usd"), _usd), spread_text(c.get("duration_ms"), _ms),
            number(baseline_cases.get(name, {}).get("pass_rate")),
            difference(d.get("pass_rate"), "pts", _points),
            difference(d.get("cost_usd"), "USD", _signed_usd),
            difference(d.get("duration_ms"), "ms", _signed_ms),
            tuple(f.assertion for f in flags if f.case == name)))
    return LatestEval(
        record.id, record.created_at, text(report.get("version")), record.subject,
        record.baseline, record.runs_per_case, record.pass_rate, record.baseline_pass_rate,
        record.spent_usd, number(report.get("judge_usd")), record.stopped, ks, tuple(rows),
        flags, as_json_text(record.report))


@dataclass(frozen=True)
class TrendPoint:
    eval_id: str
    created_at: datetime
    subject: str
    baseline: str | None
    pass_rate: float | None
    x: float
    y: float | None  # None: no pass rate (no run ended), no dot


@dataclass(frozen=True)
class Trend:
    points: tuple[TrendPoint, ...]  # oldest to newest
    line: str  # the polyline's points through the dots
    width: int = SPARK_W
    height: int = SPARK_H

    @property
    def top(self) -> int:  # the y of 100%
        return SPARK_PAD

    @property
    def bottom(self) -> int:  # the y of 0%
        return SPARK_H - SPARK_PAD


def trend(records: Sequence[EvalRecord]) -> Trend:
    """``records`` oldest first: each eval's pass rate, on a fixed 0 to 100% scale."""
    n = len(records)
    inner_w, inner_h = SPARK_W - 2 * SPARK_PAD, SPARK_H - 2 * SPARK_PAD
    points = []
    for i, r in enumerate(records):
        x = SPARK_PAD + (inner_w / 2 if n == 1 else inner_w * i / (n - 1))
        rate = r.pass_rate if r.pass_rate is None else min(1.0, max(0.0, r.pass_rate))
        y = None if rate is None else SPARK_PAD + inner_h * (1 - rate)
        points.append(TrendPoint(r.id, r.created_at, r.subject, r.baseline, r.pass_rate,
                                 round(x, 1), None if y is None else round(y, 1)))
    line = " ".join(f"{p.x},{p.y}" for p in points if p.y is not None)
    return Trend(tuple(points), line)


@dataclass(frozen=True)
class EvalSection:
    latest: LatestEval | None  # None: the skill was never evaluated
    trend: Trend


def eval_section(session: Session, skill: str) -> EvalSection:
    records = latest_evals(session, skill, limit=TREND_EVALS)  # newest first
    return EvalSection(latest_eval(records[0]) if records else None,
                       trend(list(reversed(records))))
