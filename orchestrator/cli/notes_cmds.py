"""`skillq notes [NAME] [--all]` and `skillq notes dismiss|resolve|wontfix ID`: the
improvement notes production failures left; reading or closing one never touches a
skill's files."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text
from sqlalchemy.exc import SQLAlchemyError

from orchestrator.cli.common import out
from orchestrator.connect import connect
from shared.db.notes_models import ImprovementNote
from shared.db.session import transaction
from shared.errors import NoteError, SkillqError
from shared.notes import Status, list_notes, open_counts, set_status
from shared.settings import get_settings

ACTIONS = {"dismiss": Status.DISMISSED, "resolve": Status.RESOLVED,
           "wontfix": Status.WONTFIX}


def register(app: typer.Typer) -> None:
    app.command("notes")(notes)


def notes(
    words: Annotated[list[str] | None, typer.Argument(
        help="NAME to list one skill's notes, or dismiss|resolve|wontfix ID.",
        show_default=False, metavar="[NAME | dismiss ID | resolve ID | wontfix ID]")] = None,
    every: Annotated[bool, typer.Option("--all", help="Closed notes too (dismissed, "
                                        "resolved, wontfix).")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Every field, as JSON.")] = False,
) -> None:
    """Improvement notes left by production failures: step, error, inputs (secrets
    hidden), diagnosis and suggested fix. Repeats of one failure count on one note."""
    args = list(words or [])
    if args and args[0] in ACTIONS:
        if len(args) != 2 or not args[1].isdigit():
            raise NoteError(f"usage: skillq notes {args[0]} ID (a number from `skillq notes`)")
        _close(int(args[1]), ACTIONS[args[0]])
        return
    if len(args) > 1:
        raise NoteError("give one skill name, or dismiss|resolve|wontfix ID")
    conn = connect(workers=False)
    with transaction(conn.endpoints.database_url) as session:
        found = list_notes(session, args[0] if args else None, include_closed=every)
        rows = [_as_dict(n) for n in found]
    if as_json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return
    if not rows:
        what = f" for {args[0]}" if args else ""
        out.print(f"no {'' if every else 'open '}improvement notes{what}", markup=False)
        return
    _print(rows, every)


def _close(note_id: int, status: Status) -> None:
    conn = connect(workers=False)
    with transaction(conn.endpoints.database_url) as session:
        note = set_status(session, note_id, status)
        skill, step = note.skill, note.step_id
    out.print(f"✓ note {note_id} ({skill} step {step}) is now {status}", markup=False)


def _as_dict(note: ImprovementNote) -> dict[str, Any]:
    return {"id": note.id, "status": note.status, "skill": note.skill,
            "version": note.version, "step": note.step_id, "pipeline": note.pipeline,
            "run_id": note.run_id, "step_run_id": note.step_run_id, "count": note.count,
            "first_seen": note.first_seen.isoformat(), "last_seen": note.last_seen.isoformat(),
            "error": note.error, "error_kind": note.error_kind, "exit_code": note.exit_code,
            "diagnosis": note.diagnosis, "summary": note.summary,
            "suggested_fix": note.suggested_fix, "inputs": note.inputs,
            "worker": note.worker}


def _print(rows: list[dict[str, Any]], with_status: bool) -> None:
    console = out if out.is_terminal else Console(width=100_000, highlight=False)
    table = Table(title="improvement notes", title_justify="left")
    table.add_column("id", no_wrap=True)
    columns = ["skill", "step", "diagnosis", "seen", "last run", "what happened",
               "suggested fix", "inputs"]
    if with_status:
        columns.insert(0, "status")
    for column in columns:
        table.add_column(column, overflow="fold")
    for r in rows:
        cells = [f"{r['skill']} v{r['version']}", r["step"], r["diagnosis"],
                 f"{r['count']}× · last {r['last_seen'][:19]}", r["run_id"], r["summary"],
                 r["suggested_fix"], json.dumps(r["inputs"], ensure_ascii=False)[:300]]
        if with_status:
            cells.insert(0, r["status"])
        table.add_row(str(r["id"]), *(Text(c) for c in cells))  # errors hold [brackets]
    console.print(table)
    console.print("close one with `skillq notes dismiss|resolve|wontfix ID`", markup=False)


def open_note_counts(names: Iterable[str]) -> dict[str, int]:
    """Skill -> open notes, for markers in `show` and `list`: best effort, {} when no
    database is reachable without starting one (reading a vault never starts servers)."""
    from orchestrator.embedded import resolve_endpoints

    try:
        endpoints = resolve_endpoints(get_settings(), start=False)
        with transaction(endpoints.database_url) as session:
            return open_counts(session, names)
    except (SkillqError, SQLAlchemyError):
        return {}


def mark_open_notes(name: str) -> None:
    """`skillq show`'s line for a skill with open notes (nothing when it has none)."""
    count = open_note_counts([name]).get(name)
    if count:
        out.print(f"⚑ {count} open improvement note(s): `skillq notes {name}`",
                  style="yellow", markup=False)
