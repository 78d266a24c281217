"""An eval's report from its judged runs (orchestrator/evals/report.py): the differences
from the baseline with their intervals, and the assertions flagged as never
discriminating: only those every run of both sides met."""

from __future__ import annotations

import pytest

from lifecycle.run_costs import Usage
from orchestrator.evals.report import OVERALL, EvalReport, EvalRun, as_json
from shared.case_judge import CaseResult, Check, Outcome
from shared.eval_stats import rate_difference


def run(case: str, arm: str, *checks: tuple[str, bool], cost: float = 0.001) -> EvalRun:
    passed = all(ok for _, ok in checks)
    verdict = CaseResult("s", case, case, passed, () if passed else ("no",),
                         Outcome("succeeded", duration_ms=10.0),
                         checks=tuple(Check(a, ok) for a, ok in checks))
    return EvalRun(case, f"run-{case}-{arm}", verdict, Usage(cost, 10, 2), arm)


def test_only_an_assertion_every_run_of_both_sides_met_is_flagged() -> None:
    report = EvalReport("s", 1, "draft", "none", runs=[
        run("a", "skill", ("success", True), ("output 'x'", True)),
        run("a", "skill", ("success", True), ("output 'x'", True)),
        run("a", "baseline", ("success", True), ("output 'x'", False)),
        run("a", "baseline", ("success", True), ("output 'x'", True)),
        # a failed run checks no outputs: an assertion missing from a run is not met
        run("b", "skill", ("success", True), ("schema", True)),
        run("b", "baseline", ("success", False)),
    ])
    assert report.non_discriminating() == [("a", "success")]


def test_no_baseline_flags_nothing_and_reports_no_differences() -> None:
    report = EvalReport("s", 1, runs=[run("a", "skill", ("success", True))] * 3)
    assert report.non_discriminating() == [] and report.differences() == []
    shown = as_json(report, [1, 3])
    assert "differences" not in shown and shown["pass_rate"] == 1.0


def test_each_case_and_all_cases_get_the_difference_with_its_interval() -> None:
    runs = [run("a", "skill", ("success", True))] * 4 + \
        [run("a", "baseline", ("success", ok)) for ok in (True, False, False, False)] + \
        [run("b", "skill", ("success", ok), cost=0.002) for ok in (True, False)] + \
        [run("b", "baseline", ("success", False))] * 2
    report = EvalReport("s", 1, "v2", "v1", runs=runs)
    a, b, overall = report.differences()
    assert (a.case, b.case, overall.case) == ("a", "b", OVERALL)
    assert a.pass_rate == rate_difference(4, 4, 1, 4)
    assert overall.pass_rate == rate_difference(5, 6, 1, 6)
    assert b.cost_usd is not None and b.cost_usd.difference == pytest.approx(0.001)
    shown = as_json(report, [1])
    assert shown["baseline_pass_rate"] == pytest.approx(1 / 6)
    assert shown["differences"][0]["pass_rate"]["excludes_zero"] is a.pass_rate.excludes_zero


def test_the_table_puts_a_dash_where_a_case_had_fewer_runs_than_k(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from orchestrator.cli.common import out
    from orchestrator.cli.eval_cmds import _print

    monkeypatch.setattr(out, "width", 200)  # a row on one line, whatever the terminal

    report = EvalReport("s", 1, runs=[run("a", "skill", ("success", True))] * 4
                        + [run("b", "skill", ("success", True))] * 2)
    _print(report, [1, 4])
    rows = [line for line in capsys.readouterr().out.splitlines()
            if line.startswith(("│ a", "│ b"))]
    cells = [[c.strip() for c in line.strip("│").split("│")] for line in rows]
    assert cells[0][3:7] == ["1.00", "1.00", "1.00", "1.00"]
    assert cells[1][3:7] == ["1.00", "-", "1.00", "-"]
