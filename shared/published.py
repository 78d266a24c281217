"""Published versions in PostgreSQL, their files in the shared store, and the check
that a folder is one of them.

A published version is a row of ``published_versions`` (shared/db/publish_models.py)
plus one artifact per file, addressed by the file's SHA-256, so any daemon can rebuild
the folder without sharing a filesystem with the machine that published it. The
repository functions take the session; the caller owns the transaction.

``verify`` is what a worker runs before every step of a published skill (and `skillq
run` before planning a published orchestrator). Hashing every file each time would cost
a read of the whole folder per step, so a verified folder is remembered with its stat
signature (shared/folderhash.py Signature): any write, replacement, chmod, addition or
removal of a file changes it (ctime cannot be set back by a user, unlike mtime), so an
unchanged signature means unchanged content and the per-step cost is one directory walk
with stat calls plus one read of benchmarks.json. One gap: file times come from a
coarse clock (a few ms), so a file written twice within one tick keeps its times. As git
does for its index ("racy clean"), a signature holding a time less than RACY_S old is
not trusted: that folder is hashed again until its files are older.

Published rows never change once written, so ``published_files`` caches them for the
life of the process. "V is not published" is remembered with the folder's signature and
for ``ttl_s`` at most: publishing makes every file read-only after its row is committed,
which changes each file's ctime, so on the machine that published, the next step looks
again at once (the caller takes the signature before the lookup); elsewhere within the
TTL.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from shared.db.publish_models import PublishedVersion
from shared.db.session import transaction
from shared.folderhash import (
    BENCHMARKS,
    Change,
    FileEntry,
    Signature,
    changes,
    content_paths,
    file_entry,
    fingerprint,
    fingerprints,
    folder_files,
    folder_hash,
    ignored,
    stat_signature,
)
from shared.readonly import make_read_only, make_writable
from shared.store import get_bytes, put_bytes

FILE_MEDIA = "application/octet-stream"
RACY_S = 1.0  # far above the file-time clock's tick
HASH_SCHEME = 2  # test cases, bytecode caches and executable bits are part of a version


@dataclass(frozen=True)
class Snapshot:
    """A folder's content read once: the bytes that are stored are the bytes hashed."""

    files: Mapping[str, FileEntry]
    contents: Mapping[str, bytes]

    @property
    def hashes(self) -> dict[str, str]:
        return {path: f.sha256 for path, f in self.files.items()}

    @property
    def fingerprints(self) -> dict[str, str]:
        return fingerprints(self.files)

    @property
    def folder_hash(self) -> str:
        return folder_hash(self.fingerprints)

    @property
    def symlinks(self) -> list[str]:
        return [p for p, f in self.files.items() if f.symlink]


def snapshot(folder: Path) -> Snapshot:
    files: dict[str, FileEntry] = {}
    contents: dict[str, bytes] = {}
    for rel, entry in content_paths(folder):
        found = file_entry(rel, entry)
        if found is not None:
            files[rel], contents[rel] = found
    return Snapshot(files, contents)


@dataclass(frozen=True)
class PublishedFiles:
    """What a worker needs of a published version (detached from any session)."""

    skill: str
    version: int
    folder_hash: str
    hashes: Mapping[str, str]  # relative path -> "sha256:<hex>" (the store's key)
    executable: frozenset[str]
    hash_scheme: int = HASH_SCHEME

    @property
    def fingerprints(self) -> dict[str, str]:
        return {p: fingerprint(h, p in self.executable) for p, h in self.hashes.items()}


def files_of(row: PublishedVersion) -> PublishedFiles:
    return PublishedFiles(row.skill, row.version, row.folder_hash,
                          {p: f["sha256"] for p, f in row.files.items()},
                          frozenset(p for p, f in row.files.items() if f.get("executable")),
                          row.hash_scheme)


def _as_published(files: PublishedFiles, actual: dict[str, str]) -> dict[str, str]:
    """The folder's fingerprints under the rules ``files`` were recorded by: a version
    published before versions held their test cases (scheme 1) had neither
    benchmarks.json nor bytecode caches among its files (no step reads bytecode from a
    skill folder either way: the scratch copy leaves it out)."""
    if files.hash_scheme >= HASH_SCHEME:
        return actual
    return {p: f for p, f in actual.items() if p != BENCHMARKS and not ignored(
        tuple(p.split("/")), authored=True)}


def file_records(snap: Snapshot) -> dict[str, Any]:
    return {p: {"sha256": f.sha256, "size": f.size, "executable": f.executable}
            for p, f in snap.files.items()}


def store_files(session: Session, snap: Snapshot) -> None:
    for data in snap.contents.values():
        put_bytes(session, data, FILE_MEDIA)


def get_version(session: Session, skill: str, version: int) -> PublishedVersion | None:
    return session.get(PublishedVersion, (skill, version))


def latest_version(session: Session, skill: str) -> int:
    """The highest published version of ``skill``; 0 when it was never published."""
    found = session.scalar(select(func.max(PublishedVersion.version))
                           .where(PublishedVersion.skill == skill))
    return int(found or 0)


def list_versions(session: Session, skill: str) -> Sequence[PublishedVersion]:
    return session.scalars(select(PublishedVersion).where(PublishedVersion.skill == skill)
                           .order_by(PublishedVersion.version)).all()


def write_files(session: Session, files: PublishedFiles, dest: Path) -> None:
    """Write a published version's files from the store into the empty folder ``dest``."""
    for rel, key in files.hashes.items():
        path = dest.joinpath(*rel.split("/"))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(get_bytes(session, key))
        if rel in files.executable:
            path.chmod(0o755)


def materialise(session: Session, files: PublishedFiles, dest: Path) -> Path:
    """``dest`` holding the published files, read-only, built beside it and renamed into
    place so a concurrent reader never sees half a folder. When another process got
    there first, its folder is kept (the caller verifies whichever it uses)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        write_files(session, files, staging)
        make_read_only(staging, keep_root_writable=False)
        try:
            staging.rename(dest)
        except OSError:
            if not dest.is_dir():
                raise
    finally:
        if staging.exists():  # it was not renamed into place
            make_writable(staging)
            shutil.rmtree(staging, ignore_errors=True)
    return dest


# -- is this folder a published version? ------------------------------------------------

_lock = threading.Lock()
_rows: dict[tuple[str, int], PublishedFiles] = {}
# (skill, version) -> (the folder's signature, monotonic time) when it was not published
_unpublished: dict[tuple[str, int], tuple[Signature, float]] = {}
# folder -> (signature, published folder hash it was checked against, changes)
_verified: dict[Path, tuple[Signature, str, list[Change]]] = {}


def _settled(signature: Signature) -> bool:
    """No file time in it is recent enough to hide a second write in the same tick."""
    return signature.newest_ns < time.time_ns() - RACY_S * 1e9


def published_files(database_url: str, skill: str, version: int,
                    signature: Signature | None = None, *, ttl_s: float = 0.0
                    ) -> PublishedFiles | None:
    """The published row of ``skill`` v``version``, or None; a None is remembered only
    with the signature of the folder that declares that version, for ``ttl_s``."""
    key = (skill, version)
    with _lock:
        if key in _rows:
            return _rows[key]
        seen = _unpublished.get(key)
    if seen is not None and signature is not None and seen[0] == signature and \
            time.monotonic() - seen[1] < ttl_s:
        return None
    with transaction(database_url) as session:
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
    # Compared file by file, not by the recorded folder hash: the records say what each
    # file is (bytes and mode), whichever skillq computed the row's folder hash.
    found = changes(files.fingerprints,
                    _as_published(files, fingerprints(folder_files(folder))))
    if _settled(signature):
        with _lock:
            _verified[folder] = (signature, files.folder_hash, found)
    return found
