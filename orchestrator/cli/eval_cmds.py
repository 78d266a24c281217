"""`skillq eval NAME`: a skill's test cases run many times through the queues, with each
case's pass rate, pass@k and pass^k, and its duration, tokens and cost as mean ± stddev
(orchestrator/evals.py). Progress on stderr; the report as a table, or --json."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from orchestrator.cli.common import VaultOption, err, out, vault
from shared.errors import InputError
from shared.problems import Problem

if TYPE_CHECKING:
    from orchestrator.evals import CaseReport, EvalReport


def register(app: typer.Typer) -> None:
    app.command("eval")(eval_cmd)


def parse_ks(text: str | None, runs: int) -> list[int]:
    """``--k 1,3`` as numbers; by default 1 and the runs."""
    if not text:
        return sorted({1, runs})
    try:
        ks = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        ks = []
    if not ks or any(k < 1 or k > runs for k in ks):
        raise InputError([Problem("skillq eval", "--k", f"give k values from 1 to the runs "
                                  f"({runs}), comma-separated, e.g. --k 1,{runs}")])
    return ks


def eval_cmd(
    name: Annotated[str, typer.Argument(help="The skill to evaluate.")],
    runs: Annotated[int, typer.Option("--runs", help="Runs of each test case.")] = 5,
    k: Annotated[str | None, typer.Option(
        "--k", help="k for pass@k and pass^k, comma-separated (default: 1 and --runs).",
        show_default=False)] = None,
    budget_usd: Annotated[float | None, typer.Option(
        "--budget-usd", help="A hard stop: no model request is sent past it.",
        show_default=False)] = None,
    concurrency: Annotated[int, typer.Option("--concurrency", help="Runs at once.")] = 1,
    test_id: Annotated[str | None, typer.Option("--test", help="Only this test case id.")
                       ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")
                       ] = False,
    vault_opt: VaultOption = None,
) -> None:
    """Run a skill's test cases N times each through the queues (source eval): pass rate,
    pass@k, pass^k, and duration, tokens and cost as mean ± stddev."""
    from orchestrator.connect import connect
    from orchestrator.evals import run_eval

    ks = parse_ks(k, runs)
    loaded = vault(vault_opt)
    skill = loaded.get(name)
    conn = connect()
    columns = (TextColumn("{task.description}"), BarColumn(),
               TextColumn("{task.completed}/{task.total} runs · ${task.fields[spent]:.4f}"),
               TimeElapsedColumn())
    with Progress(*columns, console=err, transient=True) as bar:
        task = bar.add_task(f"evaluating {skill.name}", total=None, spent=0.0)
        report = run_eval(conn, loaded, skill, runs=runs, concurrency=concurrency,
                          budget_usd=budget_usd, test_id=test_id,
                          on_progress=lambda done, total, spent: bar.update(
                              task, completed=done, total=total, spent=spent))
    if as_json:
        print(json.dumps(as_dict(report, ks), ensure_ascii=False))
    else:
        _print(report, ks)
    if report.stopped:
        err.print(f"stopped: {report.stopped}", markup=False)


def _case_dict(c: CaseReport) -> dict[str, Any]:
    def sd(s: Any) -> dict[str, float] | None:
        return {"mean": s.mean, "stddev": s.stddev} if s is not None else None
    return {"case": c.case, "runs": c.runs, "passed": c.passed, "pass_rate": c.rate,
            "pass_at_k": {str(k): v for k, v in c.pass_at.items()},
            "pass_hat_k": {str(k): v for k, v in c.pass_hat.items()},
            "duration_ms": sd(c.duration_ms), "tokens": sd(c.tokens),
            "cost_usd": sd(c.cost_usd)}


def as_dict(report: EvalReport, ks: list[int]) -> dict[str, Any]:
    return {"skill": report.skill, "version": report.version, "k": ks,
            "cases": [_case_dict(c) for c in report.cases(ks)],
            "runs": [{"case": r.case, "run_id": r.run_id, "passed": r.verdict.passed,
                      "problems": list(r.verdict.problems)} for r in report.runs],
            "spent_usd": report.spent_usd, "judge_usd": report.judge_usd,
            "stopped": report.stopped}


def _print(report: EvalReport, ks: list[int]) -> None:
    table = Table(title=f"eval of {report.skill} v{report.version}", title_justify="left")
    for column in ("case", "runs", "passed", *(f"pass@{k}" for k in ks),
                   *(f"pass^{k}" for k in ks), "duration ms", "tokens", "cost USD"):
        table.add_column(column, overflow="fold")
    for c in report.cases(ks):
        table.add_row(c.case, str(c.runs), f"{c.passed} ({c.rate:.0%})",
                      *(f"{c.pass_at[k]:.2f}" for k in ks if k in c.pass_at),
                      *(f"{c.pass_hat[k]:.2f}" for k in ks if k in c.pass_hat),
                      str(c.duration_ms or "-"), str(c.tokens or "-"), str(c.cost_usd or "-"))
    out.print(table)
    out.print(f"spent ${report.spent_usd:.4f} (judges ${report.judge_usd:.4f})", markup=False)
