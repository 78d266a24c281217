"""Published versions in PostgreSQL and their files in the shared store (repository
functions: each takes the session; the caller owns the transaction).

A published version is a row of ``published_versions`` (shared/db/publish_models.py)
plus one artifact per file, addressed by the file's SHA-256, so any daemon can rebuild
the folder without sharing a filesystem with the machine that published it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from shared.db.publish_models import PublishedVersion
from shared.folderhash import FileEntry, content_paths, folder_hash, hash_bytes
from shared.readonly import make_read_only, make_writable
from shared.store import get_bytes, put_bytes

FILE_MEDIA = "application/octet-stream"


@dataclass(frozen=True)
class Snapshot:
    """A folder's content read once: the bytes that are stored are the bytes hashed."""

    files: Mapping[str, FileEntry]
    contents: Mapping[str, bytes]

    @property
    def hashes(self) -> dict[str, str]:
        return {path: f.sha256 for path, f in self.files.items()}

    @property
    def folder_hash(self) -> str:
        return folder_hash(self.hashes)

    @property
    def symlinks(self) -> list[str]:
        return [p for p, f in self.files.items() if f.symlink]


def snapshot(folder: Path) -> Snapshot:
    files: dict[str, FileEntry] = {}
    contents: dict[str, bytes] = {}
    for rel, entry in content_paths(folder):
        st = entry.stat(follow_symlinks=False)
        if entry.is_symlink():
            data = b"symlink:" + os.fsencode(Path(entry.path).readlink())
        else:
            data = Path(entry.path).read_bytes()
        files[rel] = FileEntry(rel, hash_bytes(data), len(data),
                               executable=bool(st.st_mode & 0o100), symlink=entry.is_symlink())
        contents[rel] = data
    return Snapshot(files, contents)


@dataclass(frozen=True)
class PublishedFiles:
    """What a worker needs of a published version (detached from any session)."""

    skill: str
    version: int
    folder_hash: str
    hashes: Mapping[str, str]  # relative path -> "sha256:<hex>"
    executable: frozenset[str]


def files_of(row: PublishedVersion) -> PublishedFiles:
    return PublishedFiles(row.skill, row.version, row.folder_hash,
                          {p: f["sha256"] for p, f in row.files.items()},
                          frozenset(p for p, f in row.files.items() if f.get("executable")))


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
