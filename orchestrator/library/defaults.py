"""Reconciling the shipped default skills into a vault, by content hash and version.

For each default skill (orchestrator/defaults/):
  - not in the vault: installed (unless the user deleted it with `skillq delete`);
  - in the vault with the shipped content: current (its row remembers it is a default);
  - in the vault with the content an older skillq installed, untouched since: updated;
  - edited since it was installed, or a skill of the user's own with that name, or
    installed by a newer skillq (a higher DEFAULTS_VERSION): left alone.
The row keeps the hash that was written (default_hash): a folder whose hash differs
from it was edited by the user, and skillq never overwrites a user's edit. The hash is
shared/folderhash.py's over what a person wrote (``authored``: caches left out, test
cases in). A row written by a skillq that hashed differently holds another hash of the
same content, so a folder is also untouched when it hashes to what its installed
DEFAULTS_VERSION shipped (orchestrator/defaults/hashes.json, kept in this skillq's hash).
"""

from __future__ import annotations

import contextlib
import shutil
import uuid
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from sqlalchemy.orm import Session

from orchestrator.defaults import DEFAULTS_VERSION, recorded_hashes, shipped_folders
from orchestrator.library import repo
from orchestrator.library.history import tombstones
from orchestrator.library.moves import move_folder
from shared.db.library_models import LibrarySkill
from shared.errors import LibraryError
from shared.folderhash import hash_folder
from shared.problems import display_path
from shared.vault import forget_vaults


class Outcome(StrEnum):
    INSTALLED = "installed"
    UPDATED = "updated"
    CURRENT = "current"
    LEFT_ALONE = "left alone"


@dataclass(frozen=True)
class Installed:
    """What the library remembers of an installed default (from its live row)."""

    default_hash: str | None
    default_version: int | None
    shipped_hash: str | None = None  # what default_version shipped, in this skillq's hash


@dataclass(frozen=True)
class Decision:
    name: str
    outcome: Outcome
    reason: str


def decide(name: str, shipped_hash: str, found_hash: str | None, row: Installed | None,
           deleted_by_user: bool, version: int = DEFAULTS_VERSION) -> Decision:
    """What to do with one default (pure: the vault's facts in, a decision out).

    ``found_hash`` is the vault folder's content hash (None: no folder); ``row`` its live
    library row; ``deleted_by_user`` whether a default of this name was soft-deleted.
    """
    if found_hash is None:
        if deleted_by_user and row is None:
            return Decision(name, Outcome.LEFT_ALONE, "you deleted it (`skillq delete`)")
        return Decision(name, Outcome.INSTALLED, f"defaults v{version}")
    if found_hash == shipped_hash:
        return Decision(name, Outcome.CURRENT, f"defaults v{version}")
    if row is None or row.default_hash is None:
        return Decision(name, Outcome.LEFT_ALONE, "a skill of yours has this name")
    if (row.default_version or 0) > version:
        return Decision(name, Outcome.LEFT_ALONE, f"installed by a newer skillq (defaults "
                        f"v{row.default_version}); this one ships v{version}")
    if found_hash in (row.default_hash, row.shipped_hash):
        return Decision(name, Outcome.UPDATED,
                        f"v{row.default_version or '?'} -> v{version}")
    return Decision(name, Outcome.LEFT_ALONE, "edited since it was installed")


def reconcile(session: Session, root: Path, *, dry_run: bool = False) -> list[Decision]:
    """Bring the vault at ``root`` up to this skillq's defaults; what was done to each.

    Files are written before the caller commits; if the commit fails, the next run finds
    the shipped content in place and records it as current.
    """
    if not root.is_dir():
        raise LibraryError(f"vault {display_path(root)} does not exist; create it or pass "
                           "--vault PATH")
    key = repo.vault_key(root)
    repo.lock_vault(session, key)
    decisions, stale = [], []
    ledger = recorded_hashes()
    for name, source in shipped_folders().items():
        target = root / name
        shipped = hash_folder(source, authored=True)
        live = repo.live_row(session, key, name)
        deleted = any(t.default_hash for t in tombstones(session, key, name))
        installed = Installed(live.default_hash, live.default_version,
                              ledger.get(live.default_version or 0, {}).get(name)) \
            if live else None
        found = hash_folder(target, authored=True) if target.is_dir() else None
        decision = decide(name, shipped, found, installed, deleted)
        decisions.append(decision)
        if dry_run or decision.outcome is Outcome.LEFT_ALONE:
            continue
        if decision.outcome is Outcome.INSTALLED:
            _copy_in(source, target)
        elif decision.outcome is Outcome.UPDATED:
            stale.append(_replace(source, target))
        _remember(repo.ensure_row(session, key, name), shipped, session)
    for old in stale:
        shutil.rmtree(old, ignore_errors=True)
    forget_vaults()
    return decisions


def _remember(row: LibrarySkill, shipped: str, session: Session) -> None:
    row.default_hash, row.default_version = shipped, DEFAULTS_VERSION
    row.updated_at = repo.db_now(session)


def _staged(source: Path, root: Path) -> Path:
    """A full copy beside the target (a dot-folder: vault discovery skips it)."""
    staging = root / f".installing-{source.name}-{uuid.uuid4().hex[:8]}"
    shutil.copytree(source, staging, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
                    copy_function=_copy_file)
    return staging


def _copy_file(src: str, dst: str) -> str:
    # Not copy2: the package may be installed read-only, and the user's copy is theirs to
    # edit. The executable bit is content (it is hashed), so it comes along.
    shutil.copyfile(src, dst)
    if executable := Path(src).stat().st_mode & 0o111:
        Path(dst).chmod(Path(dst).stat().st_mode | executable)
    return dst


def _copy_in(source: Path, target: Path) -> None:
    staging = _staged(source, target.parent)
    try:
        staging.rename(target)
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _replace(source: Path, target: Path) -> Path:
    """Swap the new content in by renames; the old folder's new place (removed later)."""
    staging = _staged(source, target.parent)
    old = target.parent / f".replaced-{target.name}-{uuid.uuid4().hex[:8]}"
    move_folder(target, old)
    try:
        staging.rename(target)
    except OSError:
        with contextlib.suppress(OSError):
            move_folder(old, target)
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return old
