"""`skillq eval NAME`: a skill's test cases run many times through the queues (source
``eval``), judged as `skillq test` judges one run, and summed up with the numbers one
run cannot give (shared/eval_stats.py): each case's pass rate with pass@k and pass^k,
and its duration, tokens and cost as mean ± stddev.

Runs start round-robin over the cases, ``concurrency`` at a time, so a stop leaves every
case with about as many runs. The budget is a hard stop: each run's agent steps are
capped at their share of what is left, none starts once nothing is left, and a run its
cap cut short is counted as where the eval stopped, not as a failure of the skill.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from sqlalchemy import select

from lifecycle.run_costs import Usage, run_usage
from orchestrator.connect import Connection
from orchestrator.launch import launch_routed, run_progress, start_run, wait_run
from orchestrator.testing import cases_of, outcome_of
from shared.builtin import JUDGE, builtin_skill
from shared.case_judge import CaseResult, judge
from shared.db.models import StepRun
from shared.db.session import transaction
from shared.errors import InputError
from shared.eval_stats import Spread, pass_at_k, pass_hat_k, spread
from shared.inputs import local_paths
from shared.plan import build_plan
from shared.problems import Problem
from shared.skill import Skill
from shared.skillfiles import JudgeAssertion, RunSource, TestCase
from shared.states import RunState
from shared.vault import Vault

POLL_S = 0.25
BUDGET_KIND = "budget"  # an agent step's error_kind when its cap stopped it


@dataclass(frozen=True, slots=True)
class EvalRun:
    case: str
    run_id: str
    verdict: CaseResult
    usage: Usage


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


@dataclass
class EvalReport:
    skill: str
    version: int
    runs: list[EvalRun] = field(default_factory=list)
    stopped: str | None = None  # why it stopped short of every run asked for
    spent_usd: float = 0.0  # the skill's runs and the judges'
    judge_usd: float = 0.0  # the judges' alone: not the skill's cost

    def cases(self, ks: Sequence[int]) -> list[CaseReport]:
        names = list(dict.fromkeys(r.case for r in self.runs))
        return [summary(n, [r for r in self.runs if r.case == n], ks) for n in names]


def summary(case: str, runs: Sequence[EvalRun], ks: Sequence[int]) -> CaseReport:
    n, c = len(runs), sum(r.verdict.passed for r in runs)
    usable = [k for k in ks if 1 <= k <= n]
    took = [r.verdict.outcome.duration_ms for r in runs
            if r.verdict.outcome.duration_ms is not None]
    return CaseReport(
        case, n, c, {k: pass_at_k(n, c, k) for k in usable},
        {k: pass_hat_k(n, c, k) for k in usable},
        spread(took) if took else None,
        spread([float(r.usage.tokens_in + r.usage.tokens_out) for r in runs]) if runs else None,
        spread([r.usage.cost_usd for r in runs]) if runs else None)


ProgressFn = Callable[[int, int, float], None]  # (runs ended, runs asked for, USD spent)


def run_eval(conn: Connection, vault: Vault, skill: Skill, *, runs: int, concurrency: int = 1,
             budget_usd: float | None = None, test_id: str | None = None,
             on_progress: ProgressFn | None = None) -> EvalReport:
    if runs < 1 or concurrency < 1 or (budget_usd is not None and budget_usd <= 0):
        raise InputError([Problem("skillq eval", "--runs/--concurrency/--budget-usd",
                                  "give at least 1 run, a concurrency of at least 1 and a "
                                  "budget above 0 USD")])
    cases = cases_of(skill, test_id)
    todo = [case for _ in range(runs) for case in cases]  # round-robin over the cases
    report = EvalReport(skill.name, skill.manifest.version)
    flying: dict[str, tuple[TestCase, float | None]] = {}  # run id -> case, its cap
    total = len(todo)
    while todo or flying:
        while todo and len(flying) < concurrency and report.stopped is None:
            cap = _share(budget_usd, report.spent_usd, flying, concurrency)
            if cap is not None and cap <= 0:
                if not flying:
                    report.stopped = _stop_text(budget_usd, report, total)
                break
            case = todo.pop(0)
            given = local_paths(skill.manifest, case.inputs, skill.folder)
            run_id = start_run(conn, vault, skill, given, source=RunSource.EVAL,
                               triggered_by=f"eval:{case.id}", budget_usd=cap)
            flying[run_id] = (case, cap)
        if report.stopped is not None and not flying:
            break
        time.sleep(POLL_S)
        for run_id in list(flying):
            run, _ = run_progress(conn, run_id, counts=False)
            if not RunState(run.state).terminal:
                continue
            case, _cap = flying.pop(run_id)
            usage, cut = _usage(conn, run_id)
            report.spent_usd += usage.cost_usd
            if cut:  # its cap stopped it: where the budget ends, not the skill's failure
                report.stopped = _stop_text(budget_usd, report, total)
                todo.clear()
                continue
            verdict = judge(case, outcome_of(conn, run), skill.name)
            judged, judge_usage = judge_assertions(conn, vault, case, verdict,
                                                   _share(budget_usd, report.spent_usd,
                                                          flying, concurrency))
            report.spent_usd += judge_usage.cost_usd
            report.judge_usd += judge_usage.cost_usd
            report.runs.append(EvalRun(case.id, run_id, judged, usage))
        if on_progress is not None:
            on_progress(len(report.runs), total, report.spent_usd)
    return report


def judge_assertions(conn: Connection, vault: Vault, case: TestCase, verdict: CaseResult,
                     cap: float | None) -> tuple[CaseResult, Usage]:
    """The verdict with the case's judge assertions checked, each by a run of the
    built-in skillq-judge (on the queues, source eval, its cost apart from the skill's):
    a failed one adds the statement and the evidence the judge quoted."""
    judges = [a for a in case.assertions if isinstance(a, JudgeAssertion)]
    if not judges or verdict.outcome.state != RunState.SUCCEEDED:
        return verdict, Usage()
    skill = builtin_skill(JUDGE)
    assert skill is not None  # shipped with the package
    problems, cost, tokens_in, tokens_out = list(verdict.problems), 0.0, 0, 0
    for found in judges:
        given = {"statement": found.judge,
                 "outputs": json.dumps(verdict.outcome.outputs, ensure_ascii=False)}
        plan = build_plan(skill, vault.skills, given).with_budget(cap)
        if found.model:
            plan = plan.with_requested_model(found.model)
        run_id = launch_routed(conn, vault, skill, given, plan=plan,
                               source=RunSource.EVAL.value, triggered_by=f"judge:{case.id}")
        run = wait_run(conn, run_id)
        usage, _ = _usage(conn, run_id)
        cost, tokens_in, tokens_out = (cost + usage.cost_usd, tokens_in + usage.tokens_in,
                                       tokens_out + usage.tokens_out)
        said = outcome_of(conn, run).outputs or {}
        if run.state != RunState.SUCCEEDED:
            problems.append(f"judge '{found.judge}' could not decide: {run.error}")
        elif not said.get("passed"):
            problems.append(f"judge: '{found.judge}' does not hold; evidence: "
                            f"{said.get('evidence', '')!r}")
    unchecked = tuple(u for u in verdict.unchecked if u != "judge")
    return replace(verdict, passed=not problems, problems=tuple(problems),
                   unchecked=unchecked), Usage(cost, tokens_in, tokens_out)


def _share(budget_usd: float | None, spent: float, flying: dict[str, tuple[TestCase, float |
           None]], concurrency: int) -> float | None:
    """What a run starting now may spend: what is left, less what the runs in flight may
    still spend, split between the slots free."""
    if budget_usd is None:
        return None
    reserved = sum(cap or 0.0 for _, cap in flying.values())
    return (budget_usd - spent - reserved) / (concurrency - len(flying))


def _stop_text(budget_usd: float | None, report: EvalReport, total: int) -> str:
    return (f"the budget of ${budget_usd:g} was spent (${report.spent_usd:.4f}) after "
            f"{len(report.runs)} of {total} runs")


def _usage(conn: Connection, run_id: str) -> tuple[Usage, bool]:
    """The run's usage, and whether a budget cap stopped one of its steps."""
    with transaction(conn.endpoints.database_url) as session:
        usage = run_usage(session, [run_id]).get(run_id, Usage())
        cut = session.scalar(select(StepRun.id).where(
            StepRun.run_id == run_id, StepRun.error_kind == BUDGET_KIND).limit(1))
    return usage, cut is not None
