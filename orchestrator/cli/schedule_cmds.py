"""`skillq schedule add|list|pause|resume|remove` and `skillq beat` (docs/schedules.md)."""

from __future__ import annotations

import getpass
import json
import logging
import signal
import threading
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any
from zoneinfo import ZoneInfo

import typer
from rich.table import Table

from orchestrator.cli.common import VaultOption, out, vault, vault_path
from orchestrator.connect import connect
from orchestrator.library.guard import refuse_disabled_run
from orchestrator.schedules.beat import run_beat
from orchestrator.schedules.records import (
    CATCH_UP,
    CatchUp,
    NewSchedule,
    add_schedule,
    list_schedules,
    remove_schedule,
    set_paused,
)
from orchestrator.submit import checked
from shared.db.session import transaction
from shared.errors import CronError
from shared.inputs import parse_cli_inputs

schedule_app = typer.Typer(help="Run skills on cron lines (fired by `skillq beat`).",
                           no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(schedule_app, name="schedule")
    app.command("beat")(beat)


def _local(when: datetime | None, tz: str) -> str:
    return "-" if when is None else f"{when.astimezone(ZoneInfo(tz)):%Y-%m-%d %H:%M %Z}"


@schedule_app.command("add")
def add(
    name: Annotated[str, typer.Argument(help="The skill to run.")],
    cron: Annotated[str, typer.Option("--cron", help='Five cron fields, e.g. "0 7 * * *".')],
    inputs: Annotated[list[str] | None, typer.Option(
        "--input", "-i", help="NAME=VALUE (repeat; JSON for lists and objects).")] = None,
    inputs_file: Annotated[Path | None, typer.Option(
        "--inputs-file", help="A JSON object of input values.")] = None,
    tz: Annotated[str, typer.Option("--tz", help="IANA time zone the cron line is read in.")
                  ] = "UTC",
    catch_up: Annotated[str, typer.Option(
        "--catch-up", help="A run missed while beat was down: 'once' runs it once when "
        "beat is back, 'skip' waits for the next time.")] = "once",
    vault_opt: VaultOption = None,
) -> None:
    """Schedule a skill; its inputs are checked now, as `skillq run` checks them."""
    if catch_up not in CATCH_UP:
        raise CronError(f"--catch-up '{catch_up}': use one of {', '.join(CATCH_UP)}")
    loaded = vault(vault_opt)
    skill = loaded.get(name)
    checked(loaded, skill)
    given = parse_cli_inputs(skill.manifest, inputs or [], inputs_file)  # exit 2 when bad
    conn = connect(workers=False)
    refuse_disabled_run(conn.endpoints.database_url, loaded, skill)
    policy: CatchUp = "once" if catch_up == "once" else "skip"
    new = NewSchedule(skill=name, cron=cron, tz=tz, inputs=given,
                      vault=str(vault_path(vault_opt).resolve()), workdir=str(Path.cwd()),
                      catch_up=policy, created_by=getpass.getuser())
    with transaction(conn.endpoints.database_url) as session:
        row = add_schedule(session, new)
        sid, next_due = row.id, row.next_due_at
    out.print(f"schedule {sid}: {name} at '{row.cron}' ({tz}); next run "
              f"{_local(next_due, tz)}", markup=False)


@schedule_app.command("list")
def list_(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False
          ) -> None:
    """Schedules: next run in their time zone, last run and its state, paused."""
    conn = connect(workers=False)
    with transaction(conn.endpoints.database_url) as session:
        views = list_schedules(session)
    rows: list[dict[str, Any]] = [{
        "id": v.schedule.id, "skill": v.schedule.skill, "cron": v.schedule.cron,
        "tz": v.schedule.tz, "paused": v.schedule.paused, "catch_up": v.schedule.catch_up,
        "next_run": None if v.schedule.paused else _local(v.schedule.next_due_at, v.schedule.tz),
        "last_due": _local(v.schedule.last_due_at, v.schedule.tz)
        if v.schedule.last_due_at else None,
        "last_outcome": v.schedule.last_outcome, "last_run": v.schedule.last_run_id,
        "last_run_state": v.last_run_state, "last_error": v.schedule.last_error,
        "inputs": v.schedule.inputs} for v in views]
    if as_json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return
    table = Table(title="schedules")
    for column in ("id", "skill", "cron", "tz", "next run", "last run", "run", "state",
                   "paused", "catch-up"):
        table.add_column(column, overflow="fold")
    for r in rows:
        last = "-" if r["last_due"] is None else f"{r['last_due']} ({r['last_outcome']})"
        table.add_row(str(r["id"]), r["skill"], r["cron"], r["tz"], r["next_run"] or "paused",
                      last + (f": {r['last_error']}" if r["last_error"] else ""),
                      r["last_run"] or "-", r["last_run_state"] or "-",
                      "yes" if r["paused"] else "no", r["catch_up"])
    out.print(table)


def _change(schedule_id: int, verb: str, paused: bool | None) -> None:
    conn = connect(workers=False)
    with transaction(conn.endpoints.database_url) as session:
        if paused is None:
            row = remove_schedule(session, schedule_id)
        else:
            row = set_paused(session, schedule_id, paused)
        detail = "" if paused is not False else f"; next run {_local(row.next_due_at, row.tz)}"
        out.print(f"schedule {schedule_id} ({row.skill}) {verb}{detail}", markup=False)


@schedule_app.command("pause")
def pause(schedule_id: Annotated[int, typer.Argument(metavar="ID")]) -> None:
    """Stop firing a schedule until it is resumed."""
    _change(schedule_id, "paused", True)


@schedule_app.command("resume")
def resume(schedule_id: Annotated[int, typer.Argument(metavar="ID")]) -> None:
    """Fire a paused schedule again, from its next time on."""
    _change(schedule_id, "resumed", False)


@schedule_app.command("remove")
def remove(schedule_id: Annotated[int, typer.Argument(metavar="ID")]) -> None:
    """Delete a schedule (the runs it started stay)."""
    _change(schedule_id, "removed", None)


def beat(exit_if_locked: Annotated[bool, typer.Option(
        "--exit-if-locked", help="Exit (1) when another beat holds the lock, instead of "
        "waiting to take over.")] = False) -> None:
    """Fire schedules; only one beat is active at a time (others wait for the lock)."""
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    stop = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    run_beat(connect(workers=False), wait=not exit_if_locked, stop=stop)
