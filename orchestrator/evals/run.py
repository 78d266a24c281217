"""`skillq eval NAME`: a skill's test cases run many times through the queues (source
``eval``), judged as `skillq test` judges one run, beside a baseline when one is asked
for (orchestrator/evals/arms.py), and summed up with the numbers one run cannot give
(orchestrator/evals/report.py).

Runs start round-robin over the cases, the subject's run of a case next to the
baseline's, ``concurrency`` at a time, so a stop leaves every case and both arms with
about as many runs. The budget is a hard stop: each run's agent steps are capped at
their share of what is left, none starts once nothing is left, and a run its cap cut
short is counted as where the eval stopped, not as a failure of the skill. The eval is
recorded when it ends (lifecycle/eval_records.py), stopped or not.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TypeVar

import tenacity

from lifecycle.eval_records import ResultRow, record_eval
from orchestrator.connect import Connection
from orchestrator.evals.arms import Arm, arms
from orchestrator.evals.costs import cut_by_budget, usage_of
from orchestrator.evals.judges import judge_assertions
from orchestrator.evals.report import EvalReport, EvalRun, as_json
from orchestrator.evals.scripts import check_scripts
from orchestrator.launch import cancel_run, launch_routed, run_progress
from orchestrator.library.guard import refuse_disabled_run
from orchestrator.run_end_listener import to_stderr
from orchestrator.testing import cases_of, outcome_of
from shared.case_judge import judge
from shared.db.outage import FOLLOW_WAIT_S, Outage, first_line
from shared.db.session import transaction
from shared.errors import DatabaseUnreachable, InputError
from shared.inputs import local_paths
from shared.problems import Problem
from shared.skillfiles import RunSource, TestCase
from shared.states import RunState
from shared.vault import Vault
from shared.vault_evals import vault_evals

POLL_S = 0.25
T = TypeVar("T")

ProgressFn = Callable[[int, int, float], None]  # (runs ended, runs asked for, USD spent)


@dataclass(frozen=True, slots=True)
class EvalAsk:
    """What `skillq eval` was asked for."""

    spec: str  # NAME (the folder) or NAME@V
    runs: int
    ks: Sequence[int] = (1,)
    baseline: str | None = None
    concurrency: int = 1
    budget_usd: float | None = None
    test_id: str | None = None

    def check(self) -> None:
        if self.runs < 1 or self.concurrency < 1 or (self.budget_usd is not None
                                                     and self.budget_usd <= 0):
            raise InputError([Problem("skillq eval", "--runs/--concurrency/--budget-usd",
                                      "give at least 1 run, a concurrency of at least 1 "
                                      "and a budget above 0 USD")])


@dataclass(frozen=True, slots=True)
class _Flying:
    arm: Arm
    case: TestCase
    cap: float | None


class _Eval:
    def __init__(self, conn: Connection, vault: Vault, ask: EvalAsk, report: EvalReport,
                 total: int, say: Callable[[str], None]) -> None:
        self.conn, self.vault, self.ask, self.report, self.total = (conn, vault, ask, report,
                                                                    total)
        self.flying: dict[str, _Flying] = {}
        bound = self.bound_s = conn.settings.database_outage_s
        # The eval's runs do not need it: an outage is waited out, said once each way.
        self.outage = Outage(
            on_down=lambda exc: say(f"database unreachable ({first_line(exc)}); retrying "
                                    f"for up to {bound:g} s (SKILLQ_DATABASE_OUTAGE_S); the "
                                    "eval's runs go on meanwhile"),
            on_up=lambda took_s: say(f"database back after {took_s:.0f} s; the eval goes on"),
            max_wait_s=FOLLOW_WAIT_S, give_up_s=bound)
        self.judge_model = vault_evals(vault.root).judge_model  # refused here if unreadable

    def share(self) -> float | None:
        """What a run starting now may spend: what is left, less what the runs in flight
        may still spend, split between the slots free."""
        if self.ask.budget_usd is None:
            return None
        reserved = sum(f.cap or 0.0 for f in self.flying.values())
        free = max(1, self.ask.concurrency - len(self.flying))
        return (self.ask.budget_usd - self.report.spent_usd - reserved) / free

    def stop(self) -> None:
        self.report.stopped = (f"the budget of ${self.ask.budget_usd:g} was spent "
                               f"(${self.report.spent_usd:.4f}) after {len(self.report.runs)} "
                               f"of {self.total} runs")

    def db(self, fn: Callable[[], T]) -> T:
        """``fn()``, its database work waited through an outage of up to
        SKILLQ_DATABASE_OUTAGE_S; then DatabaseUnreachable, saying where the eval was."""
        try:
            return self.outage.call(fn)
        except tenacity.RetryError:
            raise DatabaseUnreachable(
                f"the database has been unreachable for {self.bound_s:g} s "
                f"(SKILLQ_DATABASE_OUTAGE_S): the eval stopped after {len(self.report.runs)} "
                f"of {self.total} runs; its runs go on (`skillq runs --source eval`)"
            ) from None

    def start(self, arm: Arm, case: TestCase, cap: float | None) -> None:
        given = local_paths(arm.skill.manifest, case.inputs, arm.skill.folder)
        run_id = launch_routed(self.conn, self.vault, arm.skill, given,
                               plan=arm.plan(self.vault, given, cap),
                               source=RunSource.EVAL.value, triggered_by=f"eval:{case.id}")
        self.flying[run_id] = _Flying(arm, case, cap)

    def ended(self, run_id: str) -> None:
        """The ended run judged and counted; the report changes only once every read
        and judge is done, so that a try again after an outage counts it once."""
        flying = self.flying[run_id]
        run, _ = run_progress(self.conn, run_id, counts=False)
        usage, cut = usage_of(self.conn, run_id), cut_by_budget(self.conn, run_id)
        if cut:  # its cap stopped it: where the budget ends, not the skill's failure
            del self.flying[run_id]
            self.report.spent_usd += usage.cost_usd
            self.stop()
            return
        verdict = judge(flying.case, outcome_of(self.conn, run), flying.arm.skill.name)
        verdict, spent = judge_assertions(self.conn, self.vault, flying.case, verdict,
                                          self.share, self.judge_model)
        verdict = check_scripts(self.conn, self.vault, flying.arm.skill, flying.case,
                                verdict, self.share())
        del self.flying[run_id]
        self.report.spent_usd += usage.cost_usd + spent.cost_usd
        self.report.judge_usd += spent.cost_usd
        self.report.runs.append(EvalRun(flying.case.id, run_id, verdict, usage,
                                        flying.arm.role))


def run_eval(conn: Connection, vault: Vault, ask: EvalAsk, *,
             on_progress: ProgressFn | None = None,
             on_outage: Callable[[str], None] = to_stderr) -> EvalReport:
    """Run the eval ``ask`` describes and record it. ``on_outage`` hears once that the
    database is unreachable (the eval waits it out, as `skillq run` does) and once that
    it is back."""
    ask.check()
    vault_evals(vault.root)  # a broken evals.json is refused before anything runs
    subject, baseline = arms(conn, vault, ask.spec, ask.baseline)
    refuse_disabled_run(conn.endpoints.database_url, vault, vault.get(subject.skill.name))
    cases = cases_of(subject.skill, ask.test_id)
    sides = (subject,) if baseline is None else (subject, baseline)
    todo = [(arm, case) for _ in range(ask.runs) for case in cases for arm in sides]
    report = EvalReport(subject.skill.name, subject.version, subject.label,
                        baseline.label if baseline else None)
    ev = _Eval(conn, vault, ask, report, len(todo), on_outage)
    try:
        while todo or ev.flying:
            while todo and len(ev.flying) < ask.concurrency and report.stopped is None:
                cap = ev.share()
                if cap is not None and cap <= 0:
                    if not ev.flying:
                        ev.stop()
                    break
                arm, case = todo.pop(0)
                ev.db(partial(ev.start, arm, case, cap))
            if report.stopped is not None and not ev.flying:
                break
            time.sleep(POLL_S)
            for run_id in list(ev.flying):
                run, _ = ev.db(partial(run_progress, conn, run_id, counts=False))
                if RunState(run.state).terminal:
                    ev.db(partial(ev.ended, run_id))
                    if report.stopped is not None:
                        todo.clear()
            if on_progress is not None:
                on_progress(len(report.runs), ev.total, report.spent_usd)
    except KeyboardInterrupt:  # nothing left running, and what ended is kept
        for run_id in ev.flying:
            cancel_run(conn, run_id, "the eval was interrupted")
        report.stopped = f"interrupted after {len(report.runs)} of {ev.total} runs"
    ev.db(lambda: _record(conn, report, ask, subject, baseline))
    return report


def _record(conn: Connection, report: EvalReport, ask: EvalAsk, subject: Arm,
            baseline: Arm | None) -> None:
    by_role = {subject.role: subject, **({baseline.role: baseline} if baseline else {})}
    rows = [ResultRow(arm=r.arm, skill=report.skill, version=by_role[r.arm].version,
                      form=by_role[r.arm].form, case_id=r.case, run_id=r.run_id,
                      passed=r.verdict.passed,
                      checks=[(c.assertion, c.passed) for c in r.verdict.checks],
                      problems=r.verdict.problems, duration_ms=r.duration_ms,
                      tokens=r.tokens, cost_usd=r.usage.cost_usd) for r in report.runs]
    with transaction(conn.endpoints.database_url) as session:
        record_eval(session, eval_id=str(uuid.uuid4()), skill=report.skill,
                    subject=report.subject, baseline=report.baseline,
                    runs_per_case=ask.runs, pass_rate=report.pass_rate(),
                    baseline_pass_rate=report.pass_rate("baseline") if baseline else None,
                    spent_usd=report.spent_usd, stopped=report.stopped,
                    report=as_json(report, ask.ks), results=rows)
