"""`skillq rollback NAME --to N`: version N's files become the skill's newest version.

A rollback never reuses a number: it publishes N's files again as version L+1 (L the
highest published), with ``rolled_back_from = N``. Every version number keeps naming
one content forever, so run records, pins, caches and workers' verified copies stay
true; `skillq versions` shows the new row as "rollback of vN", with the same files as
vN except the manifest's version line.

The folder is rebuilt from the shared store beside the vault's skill folder (a hidden
``.NAME.rollback-*`` folder, which vault discovery skips), then swapped in by two
renames. benchmarks.json gets N's test cases (they are part of N: its code comes back
with the tests it passed) and keeps the folder's run history (``runs``, ``aggregates``).
A folder with unpublished edits is refused unless ``force`` says to discard them.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from orchestrator.connect import Connection
from orchestrator.publish import ManifestWrite, Published, StatusFn, record, reload
from shared.atomic import write_json
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
        found = changes(files_of(row).fingerprints, snap.fingerprints)
    return "; ".join(str(c) for c in found) if found else None


def _json_object(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def _carry_run_history(current: Path, restored: Path, name: str, *, keep_tests: bool
                       ) -> None:
    """``restored`` (N's benchmarks.json from the store: its test cases, or absent when N
    had none) with the run window of the folder's ``current`` one around them;
    ``keep_tests``: the current test cases stay (N holds none to restore)."""
    history = _json_object(current)
    if history is None:  # no file, or one a forced rollback discards: N's alone
        return
    if not keep_tests:
        version = _json_object(restored) or {}
        history["tests"] = version.get("tests", [])
        history["skill"] = version.get("skill", history.get("skill", name))
    write_json(restored, history)


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
    # Tested, yet no test cases stored: N was published before a version held them, so
    # the folder's own test cases are the only ones there are, and they stay.
    legacy = bool(tests_passed) and BENCHMARKS not in target.hashes
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
        _carry_run_history(skill.folder / BENCHMARKS, staged / BENCHMARKS, name,
                           keep_tests=legacy)
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
    tests = "not run (a rollback)"
    if legacy:
        tests += f"; v{to} holds no test cases, so the folder's were kept"
    elif tests_passed:
        tests = f"as tested for v{to}"
    return Published(name, version, snap.folder_hash, len(snap.files), tests,
                     rolled_back_from=to)
