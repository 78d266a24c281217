"""`skillq rollback NAME --to N`: version N's files become the skill's newest version.

A rollback never reuses a number: it publishes N's files again as version L+1 (L the
highest published), with ``rolled_back_from = N``. Every version number keeps naming
one content forever, so run records, pins, caches and workers' verified copies stay
true; `skillq versions` shows the new row as "rollback of vN", with the same files as
vN except the manifest's version line.

The folder is rebuilt from the shared store beside the vault's skill folder (a hidden
``.NAME.rollback-*`` folder, which vault discovery skips), then swapped in by two
renames; the skill's benchmarks.json (its run history) is carried over. A folder with
unpublished edits is refused unless ``force`` says to discard them.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from orchestrator.connect import Connection
from orchestrator.publish import ManifestWrite, Published, StatusFn, record, reload
from shared.db.session import transaction
from shared.errors import PublishError
from shared.folderhash import BENCHMARKS, changes
from shared.published import files_of, get_version, latest_version, list_versions, snapshot
from shared.published import write_files as write_published
from shared.readonly import make_read_only, make_writable
from shared.skill import load_skill
from shared.vault import Vault, forget_vaults
from shared.versionline import version_edit


def _remove(folder: Path) -> None:
    if folder.exists():
        make_writable(folder)
        shutil.rmtree(folder)


def _unpublished_edits(vault: Vault, name: str, url: str) -> str | None:
    """What is in the folder that no published version holds, or None."""
    skill = vault.get(name)
    snap = snapshot(skill.folder)
    with transaction(url) as session:
        row = get_version(session, name, skill.manifest.version)
        if row is None:
            return f"its v{skill.manifest.version} was never published"
        found = changes(files_of(row).hashes, snap.hashes)
    return "; ".join(str(c) for c in found) if found else None


def rollback(conn: Connection, vault: Vault, name: str, to: int, *, force: bool = False,
             status: StatusFn = lambda _: None) -> Published:
    skill = vault.get(name)
    url = conn.endpoints.database_url
    with transaction(url) as session:
        row = get_version(session, name, to)
        if row is None:
            known = ", ".join(f"v{r.version}" for r in list_versions(session, name))
            raise PublishError(f"{name} has no published v{to} (published: {known or 'none'})")
        target = files_of(row)
        tests_passed = row.tests_passed
        version = latest_version(session, name) + 1
    edits = _unpublished_edits(vault, name, url)
    if edits and not force:
        raise PublishError(f"{skill.folder} has unpublished changes ({edits}); publish them "
                           "first, or pass --force to discard them")
    status(f"restoring {name} v{to} as v{version}")
    stage_root = Path(tempfile.mkdtemp(prefix=f".{name}.rollback-", dir=skill.folder.parent))
    old = stage_root / "replaced"
    staged = stage_root / name
    moved_out = swapped = False
    try:
        staged.mkdir()
        with transaction(url) as session:
            write_published(session, target, staged)
        if (skill.folder / BENCHMARKS).is_file():  # the run history goes on
            shutil.copy2(skill.folder / BENCHMARKS, staged / BENCHMARKS)
        loaded, _ = load_skill(staged)
        if loaded is None:
            raise PublishError(f"{name} v{to} from the store does not load")
        ManifestWrite(version_edit(loaded, version)).apply()
        reload(staged, version)  # it loads as the new version before it replaces anything
        snap = snapshot(staged)
        make_writable(skill.folder)
        skill.folder.rename(old)
        moved_out = True
        staged.rename(skill.folder)
        swapped = True
        final = reload(skill.folder, version)
        with transaction(url) as session:
            record(session, skill=final, snap=snap, version=version, vault=vault,
                   tests_passed=tests_passed, rolled_back_from=to)
    except BaseException:
        if swapped:  # put the user's folder back as it was
            skill.folder.rename(staged)
        if moved_out:
            old.rename(skill.folder)
        raise
    finally:
        _remove(stage_root)
        forget_vaults()
    make_read_only(skill.folder, keep_root_writable=True)
    return Published(name, version, snap.folder_hash, len(snap.files),
                     f"as tested for v{to}" if tests_passed else "not run (a rollback)",
                     rolled_back_from=to)
