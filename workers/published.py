"""Which folder a step runs, and proof that it is the published one.

The rule (docs/publishing.md): a step asks for skill NAME at version V (the plan froze V:
a `NAME@V` pin, or the vault's version when the run started).

- The vault's folder declares V and V was never published: it runs as it is (a skill
  nobody published yet).
- The vault's folder declares V and V is published: the folder must hash to what was
  published. If it differs it is a *draft* (edited since publish, its manifest still
  saying V). A production run refuses it, naming the changed files; a test or build run
  (source ``test_window`` / ``build``, as `skillq test` starts) runs the draft, since
  testing a draft is how it gets ready to publish.
- The vault's folder declares another version: V is rebuilt from the shared store under
  ``SKILLQ_HOME/published/NAME/V/NAME`` (read-only), verified, and run from there. V
  never published: refused.

Hashing every file before every step would cost a read of the whole folder per step.
A verified folder is remembered with its stat signature: (path, size, mtime_ns, ctime_ns)
of every content file. Any write, replacement, addition or removal of a file changes
that signature (ctime cannot be set back by a user, unlike mtime), so an unchanged
signature means unchanged bytes and the per-step cost is one directory walk with stat
calls and no reads. One gap: file times come from a coarse clock (a few ms), so a file
written twice within one tick keeps its times. As git does for its index ("racy
clean"), a signature holding a time less than RACY_S old is not trusted: that folder is
hashed again until its files are older.

Published rows never change once written, so they are cached for the life of the
process. "V is not published" is remembered with the folder's signature and for the
vault discovery TTL at most: publishing makes every file read-only after its row is
committed, which changes each file's ctime, so on the machine that published, the next
step looks again at once (the signature is taken before the lookup); elsewhere within
the TTL.
"""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from lifecycle.context import WorkerContext
from shared.db.models import StepRun
from shared.db.session import transaction
from shared.errors import FolderChanged, VersionNotPublished
from shared.folderhash import Change, changes, folder_files, folder_hash, stat_signature
from shared.published import PublishedFiles, files_of, get_version, materialise
from shared.readonly import make_writable
from shared.skill import Skill, load_skill
from shared.skillfiles import RunSource

if TYPE_CHECKING:
    from workers.step_runner import Claim

DRAFT_SOURCES = frozenset({RunSource.TEST_WINDOW.value, RunSource.BUILD.value})
PUBLISHED_DIR = "published"
RACY_S = 1.0  # far above the file-time clock's tick
REFUSED = (FolderChanged, VersionNotPublished)  # a step fails with one of these, unrun

Signature = tuple[tuple[str, int, int, int], ...]

_lock = threading.Lock()
_rows: dict[tuple[str, int], PublishedFiles] = {}
# (skill, version) -> (the folder's signature, monotonic time) when it was not published
_unpublished: dict[tuple[str, int], tuple[Signature, float]] = {}
# folder -> (stat signature, published folder hash it was checked against, changes)
_verified: dict[Path, tuple[Signature, str, list[Change]]] = {}
_loaded: dict[Path, Skill] = {}  # rebuilt published folders, parsed once (they never change)


def _settled(signature: Signature) -> bool:
    """No file time in it is recent enough to hide a second write in the same tick."""
    newest_ns = max((max(mtime, ctime) for _, _, mtime, ctime in signature), default=0)
    return newest_ns < time.time_ns() - RACY_S * 1e9


def published_files(ctx: WorkerContext, skill: str, version: int,
                    signature: Signature | None = None) -> PublishedFiles | None:
    """The published row of ``skill`` v``version``, or None; a None is remembered only
    with the signature of the folder that declares that version (see above)."""
    key = (skill, version)
    with _lock:
        if key in _rows:
            return _rows[key]
        seen = _unpublished.get(key)
    if seen is not None and signature is not None and seen[0] == signature and \
            time.monotonic() - seen[1] < ctx.settings.discovery_ttl_s:
        return None
    with transaction(ctx.database_url) as session:
        row = get_version(session, skill, version)
        found = files_of(row) if row is not None else None
    with _lock:
        if found is not None:
            _rows[key] = found
            _unpublished.pop(key, None)
        elif signature is not None and _settled(signature):
            _unpublished[key] = (signature, time.monotonic())
    return found


def verify(folder: Path, files: PublishedFiles, signature: Signature | None = None
           ) -> list[Change]:
    """How ``folder`` differs from the published ``files`` (empty: identical)."""
    signature = signature if signature is not None else stat_signature(folder)
    with _lock:
        hit = _verified.get(folder)
    if hit is not None and hit[0] == signature and hit[1] == files.folder_hash:
        return hit[2]
    actual = {p: f.sha256 for p, f in folder_files(folder).items()}
    found = [] if folder_hash(actual) == files.folder_hash else changes(files.hashes, actual)
    if _settled(signature):
        with _lock:
            _verified[folder] = (signature, files.folder_hash, found)
    return found


def _source(ctx: WorkerContext, row_id: str) -> str | None:
    with transaction(ctx.database_url) as session:
        row = session.get(StepRun, row_id)
        return row.source if row is not None else None


def _from_store(ctx: WorkerContext, files: PublishedFiles) -> Skill:
    dest = ctx.settings.home.expanduser().resolve() / PUBLISHED_DIR / files.skill / \
        str(files.version) / files.skill
    if dest.is_dir() and verify(dest, files):
        # A damaged copy (edited by hand, a disk error): rebuild it from the store.
        with _lock:
            _loaded.pop(dest, None)
        make_writable(dest)
        shutil.rmtree(dest)
    if not dest.is_dir():
        with transaction(ctx.database_url) as session:
            materialise(session, files, dest)
    found = verify(dest, files)
    with _lock:
        skill = _loaded.get(dest)
    if skill is None and not found:
        skill, _ = load_skill(dest)
    if found or skill is None or skill.manifest.version != files.version:
        raise FolderChanged(files.skill, files.version, dest, found,
                            hint="its files in the shared store are damaged: publish "
                            f"{files.skill} again, then pin the new version")
    with _lock:
        _loaded[dest] = skill
    return skill


def skill_for_step(ctx: WorkerContext, job: Claim, vault_skill: Skill) -> Skill:
    """The skill (and folder) this step attempt must run; FolderChanged or
    VersionNotPublished when there is none it may run."""
    if vault_skill.manifest.version != job.version:
        files = published_files(ctx, job.skill, job.version)
        if files is None:
            raise VersionNotPublished(job.skill, job.version, vault_skill.manifest.version)
        return _from_store(ctx, files)
    signature = stat_signature(vault_skill.folder)  # before the lookup: see above
    files = published_files(ctx, job.skill, job.version, signature)
    if files is None:
        return vault_skill
    found = verify(vault_skill.folder, files, signature)
    if not found or _source(ctx, job.row_id) in DRAFT_SOURCES:
        return vault_skill
    raise FolderChanged(job.skill, job.version, vault_skill.folder, found)
