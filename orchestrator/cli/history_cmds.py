"""`skillq runs` and `skillq run-show`: what ran, as a table, a tree or JSON."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Annotated

import typer
from rich.console import Console

from orchestrator.cli.common import out
from orchestrator.cli.tables import Column, Row, emit
from shared.errors import SkillqError
from shared.skillfiles import RunSource
from shared.states import RunState

AGE = re.compile(r"(?:\d+[smhdw])+")
UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}
STATE_STYLE = {"succeeded": "green", "failed": "red", "rejected": "red", "cancelled": "yellow",
               "running": "cyan"}


def register(app: typer.Typer) -> None:
    app.command("runs")(runs)
    app.command("run-show")(run_show)


def parse_since(given: str, now: datetime | None = None) -> datetime:
    """``--since``: an age back from now (30m, 2h, 1d, 1w, 1d12h) or an ISO date or
    time (2026-12-01, 2026-12-01T09:30; local time unless it names its offset)."""
    text = given.strip().lower()
    if AGE.fullmatch(text):
        seconds = sum(int(n) * UNIT_S[u] for n, u in re.findall(r"(\d+)([smhdw])", text))
        return (now or datetime.now(UTC)) - timedelta(seconds=seconds)
    try:
        moment = datetime.fromisoformat(given.strip())
    except ValueError:
        raise typer.BadParameter(
            f"'{given}' is neither an age (30m, 2h, 1d, 1w) nor an ISO date or time "
            "(2026-12-01, 2026-12-01T09:30)", param_hint="'--since'") from None
    return moment if moment.tzinfo else moment.astimezone()


def _duration(row: Row) -> str:
    took = row["duration_s"]
    return "-" if took is None else f"{took:.2f}s"


RUN_COLUMNS = (
    Column("run_id", "run", wrap=False),
    Column("skill", wrap=False),
    Column("version", "v", justify="right", spare=6),
    Column("state", wrap=False, style=lambda r: STATE_STYLE.get(r["state"], "")),
    Column("source", spare=4),
    Column("triggered_by", "triggered by", spare=3),
    Column("created_at", "created", spare=2),
    Column("duration_s", "duration", show=_duration, justify="right", spare=5),
    Column("error", limit=200),
)


def runs(
    name: Annotated[str | None, typer.Argument(help="Only this skill's runs.")] = None,
    limit: Annotated[int, typer.Option(help="How many, newest first.", min=1)] = 20,
    state: Annotated[list[RunState] | None, typer.Option(
        "--state", help="Only runs in this state (repeat for several).",
        show_default=False)] = None,
    source: Annotated[RunSource | None, typer.Option(
        "--source", help="Only runs from this source.", show_default=False)] = None,
    since: Annotated[str | None, typer.Option(
        "--since", help="Only runs created since: an age (30m, 2h, 1d, 1w) or an ISO date "
        "or time (2026-12-01, 2026-12-01T09:30).", show_default=False)] = None,
    trigger: Annotated[str | None, typer.Option(
        "--trigger", help="Only runs started by this: cli, dashboard, schedule (or "
        "schedule:ID), test (or test:CASE), or a parent skill's name.",
        show_default=False)] = None,
    as_json: Annotated[bool, typer.Option(
        "--json", help="A JSON array, one object per run (ISO times, duration in "
        "seconds).")] = False,
) -> None:
    """Pipeline run history, newest first: state, source, what triggered each run, when,
    how long, and why it failed."""
    from orchestrator.connect import connect
    from orchestrator.history import RunFilter, recent_runs
    from shared.db.session import transaction

    where = RunFilter(skill=name, states=tuple(s.value for s in state or ()),
                      source=source.value if source else None,
                      since=parse_since(since) if since is not None else None,
                      trigger=trigger)
    conn = connect(workers=False)
    with transaction(conn.endpoints.database_url) as session:
        rows = [{
            "run_id": r.id, "skill": r.skill, "version": r.version, "state": r.state,
            "source": r.source, "triggered_by": r.triggered_by, "created_at": r.created_at,
            "started_at": r.started_at, "finished_at": r.finished_at,
            "duration_s": round((r.finished_at - r.started_at).total_seconds(), 3)
            if r.finished_at and r.started_at else None,
            "error": r.error, "failed_step": r.failed_step, "failed_item": r.failed_item,
        } for r in recent_runs(session, where, limit)]
    emit(rows, RUN_COLUMNS, as_json=as_json, title="runs",
         empty="no runs match" if where != RunFilter(skill=name) else
         f"no runs{f' of {name}' if name else ''} yet; start one with `skillq run NAME`")


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
    from orchestrator import run_json
    from orchestrator.cli.run_view import render_tree
    from orchestrator.connect import connect
    from orchestrator.history import run_tree
    from shared.db.session import transaction

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
