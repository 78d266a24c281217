"""`skillq notes [NAME] [--all]` and `skillq notes dismiss|resolve|wontfix ID`: the
improvement notes production failures left; reading or closing one never touches a
skill's files."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Annotated, Any

import typer

from orchestrator.cli.common import out
from orchestrator.cli.tables import Column, aside, emit, text
from shared.errors import NoteError, SkillqError
from shared.settings import get_settings

if TYPE_CHECKING:
    from shared.db.build_models import Build
    from shared.db.notes_models import ImprovementNote

# The status each closing word sets (shared.notes.Status values; that module is loaded
# only by the commands that reach the database).
ACTIONS = {"dismiss": "dismissed", "resolve": "resolved", "wontfix": "wontfix"}


def register(app: typer.Typer) -> None:
    app.command("notes")(notes)


def notes(
    words: Annotated[list[str] | None, typer.Argument(
        help="NAME to list one skill's notes, or dismiss|resolve|wontfix ID.",
        show_default=False, metavar="[NAME | dismiss ID | resolve ID | wontfix ID]")] = None,
    every: Annotated[bool, typer.Option("--all", help="Closed notes too (dismissed, "
                                        "resolved, wontfix).")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="A JSON array, one object per "
                                          "note with every field.")] = False,
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
    from lifecycle import builds
    from orchestrator.connect import connect
    from shared.db.session import transaction
    from shared.notes import list_notes

    conn = connect(workers=False)
    with transaction(conn.endpoints.database_url) as session:
        found = list_notes(session, args[0] if args else None, include_closed=every)
        built = builds.of_notes(session, [n.id for n in found])
        rows = [{**_as_dict(n), "build": _build_of(built.get(n.id))} for n in found]
    what = f" for {args[0]}" if args else ""
    columns = [COLUMNS[0], *(STATUS if every else ()), *COLUMNS[1:]]
    emit(rows, columns, as_json=as_json, title="improvement notes",
         empty=f"no {'' if every else 'open '}improvement notes{what}")
    if rows and not as_json:
        aside("close one with `skillq notes dismiss|resolve|wontfix ID`")


def _close(note_id: int, status: str) -> None:
    from orchestrator.connect import connect
    from shared.db.session import transaction
    from shared.notes import Status, set_status

    conn = connect(workers=False)
    with transaction(conn.endpoints.database_url) as session:
        note = set_status(session, note_id, Status(status))
        skill, step = note.skill, note.step_id
    out.print(f"✓ note {note_id} ({skill} step {step}) is now {status}", markup=False)


def _build_of(build: Build | None) -> dict[str, str] | None:
    """The note's latest build (`skillq build --from-note`), as `skillq plans` shows it."""
    return {"id": build.run_id, "stage": build.stage} if build is not None else None


def _as_dict(note: ImprovementNote) -> dict[str, Any]:
    return {"id": note.id, "status": note.status, "skill": note.skill,
            "version": note.version, "step": note.step_id, "pipeline": note.pipeline,
            "run_id": note.run_id, "step_run_id": note.step_run_id, "count": note.count,
            "first_seen": note.first_seen, "last_seen": note.last_seen,
            "error": note.error, "error_kind": note.error_kind, "exit_code": note.exit_code,
            "diagnosis": note.diagnosis, "summary": note.summary,
            "suggested_fix": note.suggested_fix, "inputs": note.inputs,
            "worker": note.worker}


STATUS = (Column("status", wrap=False),)
COLUMNS = (
    Column("id", wrap=False, justify="right"),
    Column("skill", show=lambda r: f"{r['skill']} v{r['version']}"),
    Column("step"),
    Column("diagnosis", spare=2),
    Column("count", "seen", show=lambda r: f"{r['count']}× · last {text(r['last_seen'])}",
           spare=3),
    Column("run_id", "last run", wrap=False, spare=4),
    Column("summary", "what happened"),
    Column("suggested_fix", "suggested fix"),
    Column("build", show=lambda r: f"{r['build']['id']} ({r['build']['stage']})"
           if r["build"] else "", wrap=False, spare=5),
    Column("inputs", show=lambda r: json.dumps(r["inputs"], ensure_ascii=False),
           limit=300, spare=1),
)


def open_note_counts(names: Iterable[str]) -> dict[str, int]:
    """Skill -> open notes, for markers in `show` and `list`: best effort, {} when no
    database is reachable without starting one (reading a vault never starts servers)."""
    from sqlalchemy.exc import SQLAlchemyError

    from orchestrator.embedded import resolve_endpoints
    from shared.db.session import transaction
    from shared.notes import open_counts

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
