"""An eval's report: each case's runs summed up per arm (pass rate, pass@k, pass^k, and
duration, tokens and cost as mean ± stddev), the differences from the baseline with
their 95% intervals (shared/eval_stats.py), and the assertions that never discriminate.
``as_json`` is what `skillq eval --json` prints and what the eval's record keeps."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from lifecycle.run_costs import Usage
from orchestrator.evals.arms import BASELINE, SUBJECT
from shared.case_judge import CaseResult
from shared.eval_stats import (
    Interval,
    Spread,
    mean_difference,
    pass_at_k,
    pass_hat_k,
    rate_difference,
    spread,
)

OVERALL = "(all cases)"


@dataclass(frozen=True, slots=True)
class EvalRun:
    case: str
    run_id: str
    verdict: CaseResult
    usage: Usage
    arm: str = SUBJECT

    @property
    def duration_ms(self) -> float | None:
        return self.verdict.outcome.duration_ms

    @property
    def tokens(self) -> int:
        return self.usage.tokens_in + self.usage.tokens_out


@dataclass(frozen=True, slots=True)
class CaseReport:
    case: str
    runs: int
    passed: int
    pass_at: dict[int, float]  # k -> pass@k
    pass_hat: dict[int, float]  # k -> pass^k
    duration_ms: Spread | None
    tokens: Spread | None
    cost_usd: Spread | None

    @property
    def rate(self) -> float:
        return self.passed / self.runs if self.runs else 0.0


@dataclass(frozen=True, slots=True)
class Difference:
    """One case's (or all cases') subject minus baseline."""

    case: str
    pass_rate: Interval
    duration_ms: Interval | None
    tokens: Interval | None
    cost_usd: Interval | None


@dataclass
class EvalReport:
    skill: str
    version: int
    subject: str = "draft"  # how the arm runs: "v2", "draft"
    baseline: str | None = None  # "none", "v1", "draft"
    runs: list[EvalRun] = field(default_factory=list)
    stopped: str | None = None  # why it stopped short of every run asked for
    spent_usd: float = 0.0  # the skill's runs, the baseline's and the judges'
    judge_usd: float = 0.0  # the judges' and checkers' alone: not the skill's cost

    def of(self, arm: str) -> list[EvalRun]:
        return [r for r in self.runs if r.arm == arm]

    def cases(self, ks: Sequence[int], arm: str = SUBJECT) -> list[CaseReport]:
        runs = self.of(arm)
        names = list(dict.fromkeys(r.case for r in runs))
        return [summary(n, [r for r in runs if r.case == n], ks) for n in names]

    def pass_rate(self, arm: str = SUBJECT) -> float | None:
        runs = self.of(arm)
        return sum(r.verdict.passed for r in runs) / len(runs) if runs else None

    def differences(self) -> list[Difference]:
        """Per case with runs on both arms, then over all cases together."""
        ours, theirs = self.of(SUBJECT), self.of(BASELINE)
        names = [n for n in dict.fromkeys(r.case for r in ours)
                 if any(r.case == n for r in theirs)]
        found = [difference(n, [r for r in ours if r.case == n],
                            [r for r in theirs if r.case == n]) for n in names]
        if len(found) > 1:
            both = set(names)
            found.append(difference(OVERALL, [r for r in ours if r.case in both],
                                    [r for r in theirs if r.case in both]))
        return found

    def non_discriminating(self) -> list[tuple[str, str]]:
        """(case, assertion) pairs met by every run of both arms: they tell nothing
        about the skill. None without a baseline, which is what they are told against."""
        ours, theirs = self.of(SUBJECT), self.of(BASELINE)
        flagged = []
        for case in dict.fromkeys(r.case for r in ours):
            both = [r for r in (*ours, *theirs) if r.case == case]
            if not any(r.case == case for r in theirs):
                continue
            labels = dict.fromkeys(c.assertion for r in both for c in r.verdict.checks)
            flagged += [(case, label) for label in labels
                        if all(any(c.assertion == label and c.passed for c in r.verdict.checks)
                               for r in both)]
        return flagged


def summary(case: str, runs: Sequence[EvalRun], ks: Sequence[int]) -> CaseReport:
    n, c = len(runs), sum(r.verdict.passed for r in runs)
    usable = [k for k in ks if 1 <= k <= n]
    took = [r.duration_ms for r in runs if r.duration_ms is not None]
    return CaseReport(
        case, n, c, {k: pass_at_k(n, c, k) for k in usable},
        {k: pass_hat_k(n, c, k) for k in usable},
        spread(took) if took else None,
        spread([float(r.tokens) for r in runs]) if runs else None,
        spread([r.usage.cost_usd for r in runs]) if runs else None)


def _means(ours: Sequence[float | None], theirs: Sequence[float | None]) -> Interval | None:
    a, b = [v for v in ours if v is not None], [v for v in theirs if v is not None]
    return mean_difference(a, b) if a and b else None


def difference(case: str, ours: Sequence[EvalRun], theirs: Sequence[EvalRun]) -> Difference:
    return Difference(
        case, rate_difference(sum(r.verdict.passed for r in ours), len(ours),
                              sum(r.verdict.passed for r in theirs), len(theirs)),
        _means([r.duration_ms for r in ours], [r.duration_ms for r in theirs]),
        _means([float(r.tokens) for r in ours], [float(r.tokens) for r in theirs]),
        _means([r.usage.cost_usd for r in ours], [r.usage.cost_usd for r in theirs]))


def _spread(s: Spread | None) -> dict[str, float] | None:
    return {"mean": s.mean, "stddev": s.stddev} if s is not None else None


def interval_json(i: Interval | None) -> dict[str, Any] | None:
    return None if i is None else {"estimate": i.difference, "low": i.low, "high": i.high,
                                   "excludes_zero": i.excludes_zero}


def case_json(c: CaseReport) -> dict[str, Any]:
    return {"case": c.case, "runs": c.runs, "passed": c.passed, "pass_rate": c.rate,
            "pass_at_k": {str(k): v for k, v in c.pass_at.items()},
            "pass_hat_k": {str(k): v for k, v in c.pass_hat.items()},
            "duration_ms": _spread(c.duration_ms), "tokens": _spread(c.tokens),
            "cost_usd": _spread(c.cost_usd)}


def as_json(report: EvalReport, ks: Sequence[int]) -> dict[str, Any]:
    found: dict[str, Any] = {
        "skill": report.skill, "version": report.version, "subject": report.subject,
        "baseline": report.baseline, "k": list(ks),
        "pass_rate": report.pass_rate(),
        "cases": [case_json(c) for c in report.cases(ks)]}
    if report.baseline is not None:
        found["baseline_pass_rate"] = report.pass_rate(BASELINE)
        found["baseline_cases"] = [case_json(c) for c in report.cases(ks, BASELINE)]
        found["differences"] = [
            {"case": d.case, "pass_rate": interval_json(d.pass_rate),
             "duration_ms": interval_json(d.duration_ms), "tokens": interval_json(d.tokens),
             "cost_usd": interval_json(d.cost_usd)} for d in report.differences()]
        found["non_discriminating"] = [{"case": c, "assertion": a}
                                       for c, a in report.non_discriminating()]
    found["runs"] = [{"arm": r.arm, "case": r.case, "run_id": r.run_id,
                      "passed": r.verdict.passed, "problems": list(r.verdict.problems),
                      "checks": [{"assertion": c.assertion, "passed": c.passed}
                                 for c in r.verdict.checks]} for r in report.runs]
    found.update(spent_usd=report.spent_usd, judge_usd=report.judge_usd,
                 stopped=report.stopped)
    return found
