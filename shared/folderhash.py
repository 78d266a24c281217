"""The content hash of a skill folder: SHA-256 of every file and one hash of the whole.

What is hashed is what a published version *is*: every file under the folder, by its
path relative to the folder (POSIX separators). Left out, because workers and tools
rewrite them while the skill stays the same version:

- ``benchmarks.json`` at the top, and the temporary files its atomic rewrite leaves for
  an instant (``.benchmarks.json.*``): the run window is history, not content;
- ``__pycache__`` folders, ``*.pyc`` files and ``.DS_Store``: caches a run or a file
  browser drops.

The folder hash is SHA-256 over the sorted lines ``<path>\\0<file hash>\\n``, so it is the
same on every machine and for every order the disk lists the files in. A symbolic link
is hashed as its target text (``symlink:<target>``), so replacing a file by a link is a
change, never a way around the check.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

BENCHMARKS = "benchmarks.json"  # shared.skill.BENCHMARKS; kept here to stay import-light
_IGNORED_DIRS = frozenset({"__pycache__"})
_IGNORED_FILES = frozenset({".DS_Store"})
_CHUNK = 1 << 20
PREFIX = "sha256:"


@dataclass(frozen=True, slots=True)
class FileEntry:
    path: str  # relative to the skill folder, POSIX separators
    sha256: str  # "sha256:<hex>"
    size: int
    executable: bool
    symlink: bool = False


class ChangeKind(StrEnum):
    CHANGED = "changed"
    ADDED = "added"
    REMOVED = "removed"


@dataclass(frozen=True, slots=True)
class Change:
    kind: ChangeKind
    path: str

    def __str__(self) -> str:
        return f"{self.path} {self.kind.value}"


def ignored(rel_parts: tuple[str, ...]) -> bool:
    """Whether a path (as parts relative to the skill folder) is outside the content."""
    name = rel_parts[-1]
    if any(part in _IGNORED_DIRS for part in rel_parts) or name in _IGNORED_FILES:
        return True
    if name.endswith(".pyc"):
        return True
    return len(rel_parts) == 1 and (name == BENCHMARKS or name.startswith(f".{BENCHMARKS}."))


def content_paths(folder: Path) -> Iterator[tuple[str, os.DirEntry[str]]]:
    """(relative POSIX path, directory entry) of every content file, in sorted order.

    Directories are walked without following symbolic links; a link is an entry itself.
    """
    stack: list[tuple[tuple[str, ...], str]] = [((), str(folder))]
    found: list[tuple[str, os.DirEntry[str]]] = []
    while stack:
        parts, path = stack.pop()
        with os.scandir(path) as entries:
            for entry in entries:
                rel = (*parts, entry.name)
                if ignored(rel):
                    continue
                if entry.is_dir(follow_symlinks=False):
                    stack.append((rel, entry.path))
                else:
                    found.append(("/".join(rel), entry))
    found.sort(key=lambda item: item[0])
    yield from found


def hash_bytes(data: bytes) -> str:
    return PREFIX + hashlib.sha256(data).hexdigest()


def hash_entry(entry: os.DirEntry[str]) -> tuple[str, int]:
    """(hash, size) of one directory entry, reading a file in chunks."""
    mode = entry.stat(follow_symlinks=False).st_mode
    if stat.S_ISLNK(mode):
        target = os.fsencode(Path(entry.path).readlink())
        return hash_bytes(b"symlink:" + target), len(target)
    digest = hashlib.sha256()
    size = 0
    with Path(entry.path).open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return PREFIX + digest.hexdigest(), size


def folder_files(folder: Path) -> dict[str, FileEntry]:
    """Every content file of ``folder`` with its hash, by relative path."""
    files: dict[str, FileEntry] = {}
    for rel, entry in content_paths(folder):
        st = entry.stat(follow_symlinks=False)
        sha, size = hash_entry(entry)
        files[rel] = FileEntry(rel, sha, size, executable=bool(st.st_mode & stat.S_IXUSR),
                               symlink=stat.S_ISLNK(st.st_mode))
    return files


def folder_hash(file_hashes: Mapping[str, str]) -> str:
    """The hash of a whole folder from ``{relative path: file hash}`` (any order)."""
    digest = hashlib.sha256()
    for rel in sorted(file_hashes):
        digest.update(rel.encode("utf-8", "surrogateescape") + b"\0")
        digest.update(file_hashes[rel].encode("ascii") + b"\n")
    return PREFIX + digest.hexdigest()


def changes(expected: Mapping[str, str], actual: Mapping[str, str]) -> list[Change]:
    """What differs between two ``{path: hash}`` maps, sorted by path: changed files,
    files only in ``actual`` (added) and files only in ``expected`` (removed)."""
    found = [Change(ChangeKind.CHANGED, p) for p in expected
             if p in actual and actual[p] != expected[p]]
    found += [Change(ChangeKind.ADDED, p) for p in actual if p not in expected]
    found += [Change(ChangeKind.REMOVED, p) for p in expected if p not in actual]
    return sorted(found, key=lambda c: (c.path, c.kind.value))


def stat_signature(folder: Path) -> tuple[tuple[str, int, int, int], ...]:
    """(path, size, mtime_ns, ctime_ns) of every content file: cheap (no reads), and it
    changes whenever a file is written, replaced, added or removed (see workers/published.py
    for why this is enough to skip re-hashing an unchanged folder)."""
    sig = []
    for rel, entry in content_paths(folder):
        st = entry.stat(follow_symlinks=False)
        sig.append((rel, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
    return tuple(sig)
