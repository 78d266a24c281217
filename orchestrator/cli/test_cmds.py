"""`skillq test NAME [--test ID]` and `skillq test --all`: benchmarks.json cases through
the real queues; exit 1 when a case fails."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from orchestrator.cli.common import VaultOption, err, out, vault
from shared.errors import TestCaseError, TestsFailed

if TYPE_CHECKING:  # orchestrator.testing imports SQLAlchemy and Celery: only `test` runs it
    from orchestrator.testing import TestReport
    from shared.case_judge import CaseResult


def register(app: typer.Typer) -> None:
    app.command("test")(test)


def test(
    name: Annotated[str | None, typer.Argument(help="The skill to test.", show_default=False)
                    ] = None,
    test_id: Annotated[str | None, typer.Option("--test", help="Only this test case id.")
                       ] = None,
    every: Annotated[bool, typer.Option("--all", help="Every skill of the vault that has "
                                        "test cases.")] = False,
    vault_opt: VaultOption = None,
) -> None:
    """Run a skill's test cases (benchmarks.json) through the queues, all at once.

    Prints a table of verdicts; exit 0 when every case passed, 1 when one failed, 2 on a
    usage error (no such skill or case).
    """
    if every == (name is not None):
        raise TestCaseError("name one skill, or give --all for every skill with test cases")
    if every and test_id is not None:
        raise TestCaseError("--test picks a case of one skill; it cannot go with --all")
    from orchestrator.connect import connect
    from orchestrator.testing import cases_of, run_suites

    loaded = vault(vault_opt)
    if every:
        suites = [(s, s.benchmarks.tests) for _, s in sorted(loaded.skills.items())
                  if s.benchmarks is not None and s.benchmarks.tests]
        if not suites:
            raise TestCaseError(f"no skill in {loaded.root} has test cases in benchmarks.json")
    else:
        assert name is not None
        skill = loaded.get(name)
        suites = [(skill, cases_of(skill, test_id))]
    conn = connect()
    total = sum(len(cases) for _, cases in suites)
    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
               TextColumn("{task.completed}/{task.total}"), TimeElapsedColumn())
    with Progress(*columns, console=err, transient=True) as bar:
        task = bar.add_task(f"testing {len(suites)} skill(s)", total=total)
        reports = run_suites(conn, loaded, suites,
                             on_progress=lambda done, _: bar.update(task, completed=done))
    _print(reports)
    failed = [c for r in reports for c in r.failed]
    if failed:
        raise TestsFailed(f"{len(failed)} of {total} test case(s) failed: "
                          + ", ".join(f"{c.skill}/{c.test_id}" for c in failed))
    out.print(f"✓ {total} test case(s) passed", style="green")


def _row(case: CaseResult) -> tuple[Text, ...]:
    o = case.outcome
    took = "-" if o.duration_ms is None else f"{o.duration_ms:.0f} ms"
    verdict = Text("pass", style="green") if case.passed else Text("FAIL", style="red")
    why = "; ".join(case.problems)  # as Text: errors hold [brackets], not markup
    return (Text(case.skill), Text(case.test_id), Text(case.name), verdict, Text(o.state),
            Text(took), Text(o.run_id or "-"), Text(why))


def _print(reports: list[TestReport]) -> None:
    # In a pipe, lines stay whole (no 80-column crop): the reasons are what matter.
    console = out if out.is_terminal else Console(width=100_000, highlight=False)
    table = Table(title="test cases", title_justify="left")
    for column in ("skill", "test", "name", "result", "run state", "duration"):
        table.add_column(column, overflow="fold")
    table.add_column("run", no_wrap=True)  # whole, to paste into run-show
    table.add_column("why it failed", overflow="fold")
    for report in reports:
        for case in report.cases:
            table.add_row(*_row(case))
    console.print(table)
    unchecked = sum(len(c.unchecked) for r in reports for c in r.cases)
    if unchecked:  # a model's or a checker script's to judge, over many runs
        err.print(f"note: {unchecked} judge or script assertion(s) not checked: a single "
                  "run's verdict checks expected and schema alone", markup=False)
