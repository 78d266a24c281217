"""Soft delete: the folder leaves the vault's active set, its row becomes a tombstone.

The folder moves to ``<vault>/.deleted/<name>-<UTC stamp>/`` (vault discovery skips
dot-folders), so nothing is lost and the name is free at once. The row keeps its id,
slug, label and history boundary (orchestrator/library/history.py); pipeline runs are
never touched.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.orm import Session

from orchestrator.library import repo
from orchestrator.library.dependents import Reference, find_dependents, grouped
from orchestrator.library.moves import move_folder
from shared.db.session import transaction
from shared.errors import HasDependents, LibraryError
from shared.problems import display_path
from shared.vault import Vault, forget_vaults

DELETED_DIR = ".deleted"


@dataclass(frozen=True)
class Deleted:
    name: str
    row_id: str
    archived: Path  # where the folder is now
    referrers: tuple[Reference, ...]  # non-empty only under --force


def check_dependents(vault: Vault, name: str, action: str, *, force: bool
                     ) -> tuple[Reference, ...]:
    """The references to ``name``; HasDependents unless ``force``."""
    refs = tuple(find_dependents(vault, name))
    if refs and not force:
        raise HasDependents(action, name, grouped(list(refs)))
    return refs


def mark_deleted(session: Session, vault: Vault, name: str, *, force: bool) -> Deleted:
    """Turn the row into a tombstone (the caller moves the folder and commits)."""
    skill = vault.get(name)
    refs = check_dependents(vault, name, "delete", force=force)
    key = repo.vault_key(vault.root)
    repo.unpin(session, key, name)  # takes the vault lock; the other pins close up
    row = repo.ensure_row(session, key, name)
    now = repo.db_now(session)
    target = _free_target(vault.root / DELETED_DIR, f"{name}-{now:%Y%m%dT%H%M%SZ}")
    row.name, row.deleted_at, row.updated_at = None, now, now
    row.archived_path = target.relative_to(vault.root).as_posix()
    session.flush()
    return Deleted(skill.name, row.id, target, refs)


def delete_skill(database_url: str, vault: Vault, name: str, *, force: bool) -> Deleted:
    """Soft-delete ``name``: the row and the folder move together or not at all."""
    folder = vault.get(name).folder
    moved: Deleted | None = None
    try:
        with transaction(database_url) as session:
            deleted = mark_deleted(session, vault, name, force=force)
            deleted.archived.parent.mkdir(parents=True, exist_ok=True)
            try:
                move_folder(folder, deleted.archived)
            except OSError as exc:
                raise LibraryError(f"cannot move {display_path(folder)} to "
                                   f"{display_path(deleted.archived)}: "
                                   f"{exc.strerror or exc}") from None
            moved = deleted
    except BaseException:
        if moved is not None:  # the commit failed: put the folder back
            with contextlib.suppress(OSError):
                move_folder(moved.archived, folder)
        raise
    finally:
        forget_vaults()
    assert moved is not None
    return moved


def _free_target(parent: Path, stem: str) -> Path:
    target, n = parent / stem, 1
    while target.exists():
        n += 1
        target = parent / f"{stem}-{n}"
    return target
