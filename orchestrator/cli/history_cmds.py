"""`skillq runs` and `skillq run-show`: what ran, as a table, a tree or JSON."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from orchestrator import run_json
from orchestrator.cli.common import out
from orchestrator.cli.run_view import render_tree
from orchestrator.connect import connect
from orchestrator.history import recent_runs, run_tree
from shared.db.session import transaction
from shared.errors import SkillqError


def register(app: typer.Typer) -> None:
    app.command("runs")(runs)
    app.command("run-show")(run_show)


def runs(name: Annotated[str | None, typer.Argument(help="Only this skill's runs.")] = None,
         limit: Annotated[int, typer.Option(help="How many, newest first.")] = 20) -> None:
    """Pipeline run history."""
    conn = connect(workers=False)
    table = Table(title="runs")
    for column in ("run", "skill", "state"):
        table.add_column(column, no_wrap=True)  # ids whole, to paste into run-show
    for column in ("v", "source", "started", "duration", "error"):
        table.add_column(column, overflow="fold")
    with transaction(conn.endpoints.database_url) as session:
        for r in recent_runs(session, name, limit):
            took = (r.finished_at - r.started_at).total_seconds() \
                if r.finished_at and r.started_at else None
            table.add_row(r.id, r.skill, r.state, str(r.version), r.source,
                          f"{r.created_at:%m-%d %H:%M:%S}", f"{took:.2f}s" if took else "-",
                          (r.error or "")[:120])
    out.print(table)


def run_show(
    run_id: str,
    logs: Annotated[bool, typer.Option(
        "--logs", help="Each attempt's stdout and stderr (their last lines), and an agent "
        "step's transcript: what each model turn said and the tools it called.")] = False,
    as_json: Annotated[bool, typer.Option(
        "--json", help="One JSON object: the run, its steps, attempts and nested runs.")
                       ] = False,
) -> None:
    """One run as a tree of steps: status, outputs, worker, attempts, duration, error, and
    an agent step's tokens, cost and model turns."""
    conn = connect(workers=False)
    with transaction(conn.endpoints.database_url) as session:
        tree = run_tree(session, run_id, turns=True, responses=logs)
        if tree is None:
            raise SkillqError(f"no run {run_id}; `skillq runs` lists them")
        redactor = run_json.redactor_for(tree)
        if as_json:
            print(run_json.dumps(run_json.run_json(session, tree, redactor, logs)))
            return
        outputs = run_json.outputs_by_run(session, tree, redactor)
        # In a pipe, lines stay whole (no 80-column crop): errors are what run-show is for.
        console = out if out.is_terminal else Console(width=100_000, highlight=False)
        console.print(render_tree(tree, outputs, redactor, logs))
