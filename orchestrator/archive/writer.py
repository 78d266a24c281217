"""Writing a vault archive: skill folders plus the vault's rows, as JSON lines."""

from __future__ import annotations

import contextlib
import json
import tarfile
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from orchestrator.archive import FORMAT, ROOT
from orchestrator.archive.progress import Reporter, Silent
from orchestrator.archive.tables import TABLES, Scope, TableSpec, artifact_keys, encode_row
from orchestrator.library.delete import DELETED_DIR
from orchestrator.library.repo import vault_key
from shared.errors import ArchiveError
from shared.folderhash import content_paths
from shared.problems import display_path
from shared.vault import skill_folders

BATCH = 1000


@dataclass(frozen=True)
class ExportSummary:
    archive: Path
    folders: int
    files: int
    rows: dict[str, int]


def archived_folders(root: Path) -> list[Path]:
    """The folders an archive carries: skill folders and soft-deleted ones (.deleted/)."""
    folders = skill_folders(root)
    deleted = root / DELETED_DIR
    if deleted.is_dir():
        folders += sorted(p for p in deleted.iterdir() if p.is_dir())
    return folders


def export_archive(session: Session, root: Path, dest: Path,
                   reporter: Reporter | None = None) -> ExportSummary:
    """Write ``dest`` (a .tar.gz) from the vault at ``root`` and its records.

    Written beside ``dest`` and renamed into place: a failed export leaves nothing.
    """
    reporter = reporter or Silent()
    if not root.is_dir():
        raise ArchiveError(f"vault {display_path(root)} does not exist; pass --vault PATH")
    if dest.is_dir():
        raise ArchiveError(f"{display_path(dest)} is a folder; give a file name such as "
                           "backup.tar.gz")
    if not dest.parent.is_dir():
        raise ArchiveError(f"folder {display_path(dest.parent)} does not exist; create it "
                           "first")
    if dest.exists():
        raise ArchiveError(f"{display_path(dest)} already exists; choose another name or "
                           "remove it first")
    # One snapshot for every table: a run recorded meanwhile is in all of them or none
    # (else its steps could travel without it and break the import's foreign keys).
    session.connection(execution_options={"isolation_level": "REPEATABLE READ"})
    folders = archived_folders(root)
    files = [Path(entry.path) for folder in folders
             for _, entry in content_paths(folder, authored=True)]
    with tempfile.TemporaryDirectory(prefix=".skillq-export-", dir=dest.parent) as tmp:
        records = Path(tmp)
        scope = Scope(vault_key(root))
        rows = {spec.name: _dump_table(session, spec, scope, records / f"{spec.name}.jsonl",
                                       reporter) for spec in TABLES}
        manifest = {"format": FORMAT, "created_at": datetime.now(UTC).isoformat(),
                    "vault": scope.vault, "tables": rows,
                    "files": len(files)}
        (records / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
        partial = dest.with_name(f".{dest.name}.partial")
        try:
            with tarfile.open(partial, "w:gz") as tar:
                tar.add(records / "manifest.json", f"{ROOT}/manifest.json")
                for spec in TABLES:
                    tar.add(records / f"{spec.name}.jsonl", f"{ROOT}/records/{spec.name}.jsonl")
                reporter.start("vault files", len(files))
                for path in files:
                    tar.add(path, f"{ROOT}/vault/{path.relative_to(root).as_posix()}",
                            recursive=False)
                    reporter.advance()
            partial.replace(dest)
        except OSError as exc:
            with contextlib.suppress(OSError):
                partial.unlink()
            raise ArchiveError(f"cannot write {display_path(dest)}: {exc.strerror or exc}"
                               ) from None
    return ExportSummary(dest, len(folders), len(files), rows)


def _dump_table(session: Session, spec: TableSpec, scope: Scope, path: Path,
                reporter: Reporter) -> int:
    where = spec.where(scope)
    total = session.execute(select(func.count()).select_from(spec.table).where(where)
                            ).scalar_one()
    reporter.start(spec.name, total)
    count = 0
    with path.open("w", encoding="utf-8") as fh:
        result = session.execute(select(spec.table).where(where),
                                 execution_options={"yield_per": BATCH})
        for row in result.mappings():
            data = encode_row(spec.table, row)
            scope.artifact_keys.update(artifact_keys(data))
            fh.write(json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n")
            count += 1
            reporter.advance()
    return count
