"""Importing a vault archive into a vault and a database: idempotent, ids kept.

Everything is checked before anything is written: the archive's members (no path may
leave the staging folder), its format, every table and column it holds, and every skill
folder that would land on an existing one with other content (refused unless ``force``;
then the vault's own folder is kept under ``<vault>/.replaced/``). Rows go in with
INSERT ... ON CONFLICT DO NOTHING, so importing twice adds nothing the second time. The
folders move into place inside the database transaction: a failed insert moves none.
"""

from __future__ import annotations

import json
import tarfile
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from sqlalchemy import text
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from orchestrator.archive import FORMAT, ROOT
from orchestrator.archive.progress import Reporter, Silent
from orchestrator.archive.tables import TABLES, TableSpec, decode_row
from orchestrator.library.delete import DELETED_DIR
from orchestrator.library.moves import move_folder
from orchestrator.library.repo import vault_key
from shared.db import skill_stats
from shared.db.session import transaction
from shared.errors import ArchiveError
from shared.folderhash import hash_folder
from shared.problems import display_path
from shared.vault import forget_vaults

BATCH = 500
REPLACED_DIR = ".replaced"


class FolderAction(StrEnum):
    NEW = "new"
    SAME = "unchanged"
    REPLACE = "replaced"


@dataclass(frozen=True)
class FolderPlan:
    rel: str  # "<skill>" or ".deleted/<skill>-<stamp>"
    source: Path
    action: FolderAction


@dataclass(frozen=True)
class ImportSummary:
    folders: dict[FolderAction, int]
    inserted: dict[str, int]  # table -> rows added
    present: dict[str, int]  # table -> rows already there (same id)


def import_archive(database_url: str, archive: Path, root: Path, *, force: bool = False,
                   reporter: Reporter | None = None) -> ImportSummary:
    reporter = reporter or Silent()
    if not archive.is_file():
        raise ArchiveError(f"{display_path(archive)} is not a file; give the .tar.gz that "
                           "`skillq export --archive` wrote")
    if root.exists() and not root.is_dir():
        raise ArchiveError(f"vault {display_path(root)} is a file; pass --vault with a folder")
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ArchiveError(f"cannot create the vault {display_path(root)}: "
                           f"{exc.strerror or exc}") from None
    # Staged inside the vault (a dot-folder, which discovery skips) so folders move by rename.
    with tempfile.TemporaryDirectory(prefix=".importing-", dir=root) as tmp:
        staged = _unpack(archive, Path(tmp), reporter) / ROOT
        counts = _check_manifest(archive, staged)
        plans = _plan_folders(staged / "vault", root)
        clashes = [p.rel for p in plans if p.action is FolderAction.REPLACE]
        if clashes and not force:
            raise ArchiveError(
                f"these skill folders already exist in {display_path(root)} with other "
                f"content: {', '.join(clashes)}. Import into another vault, or pass --force "
                f"to replace them (the vault's own copies are kept under {REPLACED_DIR}/)")
        inserted: dict[str, int] = {}
        present: dict[str, int] = {}
        try:
            with transaction(database_url) as session:
                for spec in TABLES:
                    path = staged / "records" / f"{spec.name}.jsonl"
                    reporter.start(spec.name, counts.get(spec.name))
                    added, seen = _load_table(session, spec, path, vault_key(root), reporter)
                    inserted[spec.name], present[spec.name] = added, seen - added
                # The running totals behind benchmarks.json count the imported history too.
                skill_stats.rebuild(session, _imported_skills(session))
                _move_folders(plans, root)
        except DBAPIError as exc:
            raise ArchiveError(f"{display_path(archive)}: the database refused its records "
                               f"({str(exc.orig or exc).splitlines()[0]}); no records were "
                               "imported") from None
        except OSError as exc:  # a folder could not move: the records were rolled back
            raise ArchiveError(f"cannot place a skill folder in {display_path(root)}: "
                               f"{exc.strerror or exc} ({exc.filename}); no records were "
                               "imported; fix it and import again") from None
        finally:
            forget_vaults()
    folders = {a: sum(p.action is a for p in plans) for a in FolderAction}
    return ImportSummary(folders, inserted, present)


def _unpack(archive: Path, into: Path, reporter: Reporter) -> Path:
    try:
        with tarfile.open(archive, "r:gz") as tar:
            members = tar.getmembers()
            strays = [m.name for m in members
                      if m.name != ROOT and not m.name.startswith(ROOT + "/")]
            if strays:
                raise ArchiveError(f"{display_path(archive)} is not a skillq vault archive "
                                   f"(it holds {strays[0]!r}); make one with `skillq export "
                                   "--archive FILE`")
            reporter.start("unpacking", len(members))
            for member in members:
                # The "data" filter refuses absolute paths, '..', links leaving the
                # folder and device files: an archive cannot write outside `into`.
                tar.extract(member, into, filter="data")
                reporter.advance()
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise ArchiveError(f"{display_path(archive)} is not a readable .tar.gz archive: "
                           f"{exc}") from None
    return into


def _check_manifest(archive: Path, staged: Path) -> dict[str, int]:
    try:
        manifest = json.loads((staged / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ArchiveError(f"{display_path(archive)}: {ROOT}/manifest.json is missing or not "
                           f"JSON ({exc}); the archive is damaged or not from skillq") from None
    if manifest.get("format") != FORMAT:
        raise ArchiveError(f"{display_path(archive)}: archive format "
                           f"{manifest.get('format')!r}; this skillq reads format {FORMAT}. "
                           "Import it with the skillq version that wrote it")
    known = {spec.name for spec in TABLES}
    records = staged / "records"
    unknown = sorted(p.stem for p in records.glob("*.jsonl") if p.stem not in known) \
        if records.is_dir() else []
    if unknown:
        raise ArchiveError(f"{display_path(archive)} holds records of tables this skillq "
                           f"does not know: {', '.join(unknown)}; upgrade skillq to import "
                           "them")
    tables = manifest.get("tables") or {}
    return {k: int(v) for k, v in tables.items() if isinstance(v, int)}


def _plan_folders(vault_dir: Path, root: Path) -> list[FolderPlan]:
    if not vault_dir.is_dir():
        return []
    sources = [p for p in sorted(vault_dir.iterdir()) if p.is_dir() and p.name != DELETED_DIR]
    if (vault_dir / DELETED_DIR).is_dir():
        sources += sorted(p for p in (vault_dir / DELETED_DIR).iterdir() if p.is_dir())
    plans = []
    for source in sources:
        rel = source.relative_to(vault_dir).as_posix()
        target = root / rel
        if not target.exists():
            action = FolderAction.NEW
        elif target.is_dir() and hash_folder(target, authored=True) == \
                hash_folder(source, authored=True):
            action = FolderAction.SAME
        else:
            action = FolderAction.REPLACE
        plans.append(FolderPlan(rel, source, action))
    return plans


def _rows(path: Path, spec: TableSpec) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            try:
                yield decode_row(spec.table, json.loads(line))
            except KeyError as exc:
                raise ArchiveError(f"records/{path.name} line {number}: column {exc} is not "
                                   f"in table {spec.name} of this database; the archive comes "
                                   "from a newer skillq: upgrade skillq to import it") from None
            except ValueError as exc:
                raise ArchiveError(f"records/{path.name} line {number}: {exc}; the archive "
                                   "is damaged") from None


def _load_table(session: Session, spec: TableSpec, path: Path, vault: str,
                reporter: Reporter) -> tuple[int, int]:
    """(rows inserted, rows read) of one table's JSON lines (a missing file: none)."""
    if not path.is_file():
        return 0, 0
    keys = [c for c in spec.table.primary_key.columns]
    statement = insert(spec.table).on_conflict_do_nothing().returning(*keys)
    added = seen = 0
    batch: list[dict[str, Any]] = []
    for row in _rows(path, spec):
        if spec.vault_column:
            row[spec.vault_column] = vault  # the history now belongs to this vault
        batch.append(row)
        if len(batch) >= BATCH:
            added += len(session.execute(statement, batch).all())
            seen += len(batch)
            reporter.advance(len(batch))
            batch = []
    if batch:
        added += len(session.execute(statement, batch).all())
        seen += len(batch)
        reporter.advance(len(batch))
    return added, seen


def _move_folders(plans: list[FolderPlan], root: Path) -> None:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    for plan in plans:
        if plan.action is FolderAction.SAME:
            continue
        target = root / plan.rel
        if plan.action is FolderAction.REPLACE:  # the vault's own copy is kept, not lost
            aside = root / REPLACED_DIR / f"{target.name}-{stamp}"
            n = 1
            while aside.exists():
                n += 1
                aside = root / REPLACED_DIR / f"{target.name}-{stamp}-{n}"
            aside.parent.mkdir(parents=True, exist_ok=True)
            move_folder(target, aside)
        target.parent.mkdir(parents=True, exist_ok=True)
        plan.source.rename(target)


def _imported_skills(session: Session) -> list[str]:
    """Every skill with records: a rebuild is a recount, so counting more is harmless."""
    return list(session.scalars(text(
        "SELECT skill FROM step_runs UNION SELECT skill FROM pipeline_runs")))
