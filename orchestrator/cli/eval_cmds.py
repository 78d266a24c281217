"""`skillq eval NAME`: a skill's test cases run many times through the queues, with each
case's pass rate, pass@k and pass^k, and its duration, tokens and cost as mean ± stddev,
beside a baseline with the differences and their intervals (orchestrator/evals/run.py); with
--triggers, how well its description gets it loaded (orchestrator/evals/triggers.py).
Progress on stderr; the report as a table, or --json."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from orchestrator.cli.common import VaultOption, err, out, vault
from orchestrator.cli.run_bar import spend_bar
from shared.errors import InputError
from shared.problems import Problem

if TYPE_CHECKING:
    from orchestrator.evals.report import EvalReport


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
    name: Annotated[str, typer.Argument(
        help="The skill to evaluate: NAME (its folder) or NAME@V (a published version).")],
    runs: Annotated[int, typer.Option("--runs", help="Runs of each test case.")] = 5,
    k: Annotated[str | None, typer.Option(
        "--k", help="k for pass@k and pass^k, comma-separated (default: 1 and --runs).",
        show_default=False)] = None,
    baseline: Annotated[str | None, typer.Option(
        "--baseline", help="Compare with: none (the same request, no skill loaded), "
        "NAME@V (a published version) or DRAFT (the folder).", show_default=False)] = None,
    budget_usd: Annotated[float | None, typer.Option(
        "--budget-usd", help="A hard stop: no model request is sent past it.",
        show_default=False)] = None,
    concurrency: Annotated[int, typer.Option("--concurrency", help="Runs at once.")] = 1,
    test_id: Annotated[str | None, typer.Option("--test", help="Only this test case id.")
                       ] = None,
    triggers: Annotated[bool, typer.Option(
        "--triggers", help="Evaluate the description instead: does an agent load this "
        "skill for the queries under `triggers` in benchmarks.json?")] = False,
    improve: Annotated[bool, typer.Option(
        "--improve", help="With --triggers: propose a better description, chosen by its "
        "held-out score, written as a draft.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")
                       ] = False,
    vault_opt: VaultOption = None,
) -> None:
    """Run a skill's test cases N times each through the queues (source eval): pass rate,
    pass@k, pass^k, and duration, tokens and cost as mean ± stddev, beside a baseline."""
    if triggers:
        from orchestrator.cli.trigger_cmds import triggers_cmd

        triggers_cmd(name, vault_opt, improve, budget_usd, as_json)
        return
    if improve:
        raise InputError([Problem("skillq eval", "--improve", "--improve tunes a "
                                  "description: give it with --triggers")])
    from orchestrator.connect import connect
    from orchestrator.evals.report import as_json as report_json
    from orchestrator.evals.run import EvalAsk, run_eval

    ks = parse_ks(k, runs)
    ask = EvalAsk(name, runs, ks, baseline, concurrency, budget_usd, test_id)
    ask.check()
    loaded = vault(vault_opt)
    conn = connect()
    with spend_bar(f"evaluating {name}") as show:
        report = run_eval(conn, loaded, ask, on_progress=show,
                          on_outage=lambda text: err.print(text, markup=False))
    if as_json:
        print(json.dumps(report_json(report, ks), ensure_ascii=False))
    else:
        _print(report, ks)
    if report.stopped:
        err.print(f"stopped: {report.stopped}", markup=False)


def _pct(x: Any) -> str:
    return "-" if x is None else f"{x:.0%}"


def _interval(d: dict[str, Any] | None, fmt: str = "{:+.2f}") -> str:
    if d is None:
        return "-"
    mark = " *" if d["excludes_zero"] else ""
    return (f"{fmt.format(d['estimate'])} [{fmt.format(d['low'])}, "
            f"{fmt.format(d['high'])}]{mark}")


def _print(report: EvalReport, ks: list[int]) -> None:
    from orchestrator.evals.report import as_json as report_json

    shown = report_json(report, ks)
    title = f"eval of {report.skill} {report.subject}"
    table = Table(title=title, title_justify="left")
    for column in ("case", "runs", "passed", *(f"pass@{k}" for k in ks),
                   *(f"pass^{k}" for k in ks), "duration ms", "tokens", "cost USD"):
        table.add_column(column, overflow="fold")
    for c in report.cases(ks):
        table.add_row(c.case, str(c.runs), f"{c.passed} ({c.rate:.0%})",
                      # a case stopped short of k runs has no estimate for that k
                      *(f"{c.pass_at[k]:.2f}" if k in c.pass_at else "-" for k in ks),
                      *(f"{c.pass_hat[k]:.2f}" if k in c.pass_hat else "-" for k in ks),
                      str(c.duration_ms or "-"), str(c.tokens or "-"), str(c.cost_usd or "-"))
    out.print(table)
    if report.baseline is not None:
        vs = Table(title=f"{report.subject} against the baseline {report.baseline} "
                   "(difference, 95% interval; * excludes 0)", title_justify="left")
        for column in ("case", "pass rate", "baseline", "pass rate difference",
                       "cost USD difference", "duration ms difference"):
            vs.add_column(column, overflow="fold")
        rates = {c["case"]: c["pass_rate"] for c in shown["cases"]}
        theirs = {c["case"]: c["pass_rate"] for c in shown["baseline_cases"]}
        rates["(all cases)"], theirs["(all cases)"] = (shown["pass_rate"],
                                                      shown["baseline_pass_rate"])
        for d in shown["differences"]:
            vs.add_row(d["case"], _pct(rates.get(d["case"])), _pct(theirs.get(d["case"])),
                       _interval(d["pass_rate"]), _interval(d["cost_usd"], "{:+.4f}"),
                       _interval(d["duration_ms"], "{:+.0f}"))
        out.print(vs)
        for flagged in shown["non_discriminating"]:
            out.print(f"never discriminates: {flagged['case']}: {flagged['assertion']} "
                      f"(met by every run of both)", markup=False)
    out.print(f"spent ${report.spent_usd:.4f} (judges ${report.judge_usd:.4f})", markup=False)
