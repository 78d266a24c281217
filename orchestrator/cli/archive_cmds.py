"""`skillq import` and the archive mode of `skillq export`: a vault with its history.

The work is in orchestrator/archive/; here the bars (on stderr) and the summary.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from orchestrator.cli.common import VaultOption, err, out, vault_path
from shared.problems import display_path


def register(app: typer.Typer) -> None:
    app.command("import")(import_)


class Bars:
    """A Reporter drawing one rich bar per phase on stderr (only on a terminal)."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.task: TaskID | None = None

    def start(self, label: str, total: int | None) -> None:
        if self.task is not None:
            self.progress.update(self.task, completed=self.progress.tasks[-1].total or 0)
        self.task = self.progress.add_task(label, total=total)

    def advance(self, units: int = 1) -> None:
        if self.task is not None:
            self.progress.advance(self.task, units)


def _progress() -> Progress:
    return Progress(TextColumn("{task.description:<16}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), console=err, transient=False,
                    disable=not err.is_terminal)


def export_to_archive(dest: Path, vault_opt: Path | None) -> None:
    """`skillq export --archive FILE`: the vault's folders and records in one .tar.gz."""
    from orchestrator.archive.writer import export_archive
    from orchestrator.connect import connect
    from shared.db.session import transaction

    root = vault_path(vault_opt)
    url = connect(workers=False).endpoints.database_url
    with _progress() as progress, transaction(url) as session:
        summary = export_archive(session, root, dest, Bars(progress))
    rows = ", ".join(f"{n} {t}" for t, n in summary.rows.items())
    out.print(f"wrote {display_path(summary.archive)}: {summary.folders} skill folder(s), "
              f"{summary.files} file(s); {rows}", markup=False)


def import_(
    archive: Annotated[Path, typer.Argument(help="A .tar.gz written by `skillq export "
                                            "--archive`.", show_default=False)],
    force: Annotated[bool, typer.Option("--force", help="Replace skill folders that exist "
                                        "with other content (the vault's copies are kept "
                                        "under .replaced/).")] = False,
    vault_opt: VaultOption = None,
) -> None:
    """Restore a vault archive: its skill folders into the vault and its history into the
    database. Importing the same archive again adds nothing (ids are kept)."""
    from orchestrator.archive.restore import import_archive
    from orchestrator.connect import connect

    root = vault_path(vault_opt)
    url = connect(workers=False).endpoints.database_url
    with _progress() as progress:
        summary = import_archive(url, archive, root, force=force, reporter=Bars(progress))
    folders = ", ".join(f"{n} {a}" for a, n in summary.folders.items())
    out.print(f"imported {display_path(archive)} into {display_path(root)}: folders {folders}",
              markup=False)
    for table, added in summary.inserted.items():
        out.print(f"  {table}: {added} added, {summary.present[table]} already there",
                  markup=False)
