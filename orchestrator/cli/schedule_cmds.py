"""`skillq schedule add|list|pause|resume|remove` and `skillq beat` (docs/schedules.md)."""

from __future__ import annotations

import getpass
import logging
import signal
import threading
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any
from zoneinfo import ZoneInfo

import typer

from orchestrator.cli.common import VaultOption, out, vault, vault_path
from orchestrator.cli.tables import Column, Row, emit
from shared.errors import CronError

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
    cron: Annotated[str, typer.Option("--cron", help='Five cron fields, e.g. "0 7 * * *", '
                                      "or @hourly, @daily, @weekly, @monthly, @yearly.")],
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
    from orchestrator.connect import connect
    from orchestrator.library.guard import refuse_disabled_run
    from orchestrator.schedules.records import CATCH_UP, CatchUp, NewSchedule, add_schedule
    from orchestrator.submit import checked
    from shared.db.session import transaction
    from shared.inputs import parse_cli_inputs

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


def _last(row: Row) -> str:
    if row["last_due"] is None:
        return "-"
    error = f": {row['last_error']}" if row["last_error"] else ""
    return f"{_local(row['last_due'], row['tz'])} ({row['last_outcome']}){error}"


SCHEDULE_COLUMNS = (
    Column("id", justify="right"),
    Column("skill", wrap=False),
    Column("cron"),
    Column("tz", spare=3),
    Column("next_run", "next run",
           show=lambda r: "paused" if r["paused"] else _local(r["next_run"], r["tz"])),
    Column("last_due", "last run", show=_last),
    Column("last_run", "run", wrap=False, spare=2),
    Column("last_run_state", "state"),
    Column("paused"),
    Column("catch_up", "catch-up", spare=1),
)


@schedule_app.command("list")
def list_(as_json: Annotated[bool, typer.Option(
        "--json", help="A JSON array, one object per schedule (times ISO 8601, UTC).")
        ] = False) -> None:
    """Schedules: next run in their time zone, last run and its state, paused."""
    from orchestrator.connect import connect
    from orchestrator.schedules.records import list_schedules
    from shared.db.session import transaction

    conn = connect(workers=False)
    with transaction(conn.endpoints.database_url) as session:
        views = list_schedules(session)
    rows: list[dict[str, Any]] = [{
        "id": v.schedule.id, "skill": v.schedule.skill, "cron": v.schedule.cron,
        "tz": v.schedule.tz, "paused": v.schedule.paused, "catch_up": v.schedule.catch_up,
        "next_run": None if v.schedule.paused else v.schedule.next_due_at,
        "last_due": v.schedule.last_due_at,
        "last_outcome": v.schedule.last_outcome, "last_run": v.schedule.last_run_id,
        "last_run_state": v.last_run_state, "last_error": v.schedule.last_error,
        "inputs": v.schedule.inputs} for v in views]
    emit(rows, SCHEDULE_COLUMNS, as_json=as_json, title="schedules",
         empty="no schedules; add one with `skillq schedule add NAME --cron ...`")


def _change(schedule_id: int, verb: str, paused: bool | None) -> None:
    from orchestrator.connect import connect
    from orchestrator.schedules.records import remove_schedule, set_paused
    from shared.db.session import transaction

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
    from orchestrator.connect import connect
    from orchestrator.schedules.beat import run_beat

    run_beat(connect(workers=False), wait=not exit_if_locked, stop=stop)
