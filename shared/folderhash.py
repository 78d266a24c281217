"""The content hash of a skill folder: what a published version is, and what the
defaults reconciler and vault archives compare.

Every file under the folder counts, by its path relative to the folder (POSIX
separators), its bytes and whether it is executable: a ``__pycache__`` folder or a
``.pyc`` file is content like any other, because Python would run it. Two things are
not the bytes on disk:

- ``benchmarks.json`` at the top counts by its test cases only (its ``skill`` and
  ``tests``, as canonical JSON): workers rewrite its run window (``runs``,
  ``aggregates``, ``version``) after every run, so that part is history, not content.
  Without test cases it is only a run window and is left out, so a worker creating it
  after a first run changes nothing. The temporary files of its atomic rewrite
  (``.benchmarks.json.*``) are left out as well;
- ``.DS_Store`` (a file browser's view settings, dropped by merely opening the folder)
  is left out: nothing runs or reads it.

A file's *fingerprint* is ``sha256:<hex>``, with `` +x`` appended when it is
executable; the folder hash is SHA-256 over the sorted lines
``<path>\\0<fingerprint>\\n``, the same on every machine whatever order the disk lists
the files in. A symbolic link is hashed as its target text (``symlink:<target>``), so
replacing a file by a link is a change, never a way around the check.

``authored=True`` leaves out, in addition, what tools make inside a folder (caches,
installed packages, version control). Only comparisons of what a person wrote use it
(did the user edit a default skill? is an archived folder the vault's?); a published
version never does: its caches would run.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

BENCHMARKS = "benchmarks.json"  # shared.skill.BENCHMARKS; kept here to stay import-light
VERSION_KEYS = ("skill", "tests")  # benchmarks.json's part a version holds
_IGNORED_FILES = frozenset({".DS_Store"})
_TOOL_DIRS = frozenset({"__pycache__", "node_modules", ".git"})
_CHUNK = 1 << 20
PREFIX = "sha256:"
EXECUTABLE = " +x"


def fingerprint(sha256: str, executable: bool) -> str:
    return sha256 + EXECUTABLE if executable else sha256


@dataclass(frozen=True, slots=True)
class FileEntry:
    path: str  # relative to the skill folder, POSIX separators
    sha256: str  # "sha256:<hex>": also the key of its bytes in the shared store
    size: int
    executable: bool
    symlink: bool = False

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.sha256, self.executable)


class ChangeKind(StrEnum):
    CHANGED = "changed"
    ADDED = "added"
    REMOVED = "removed"
    MADE_EXECUTABLE = "made executable"
    NOT_EXECUTABLE = "no longer executable"


@dataclass(frozen=True, slots=True)
class Change:
    kind: ChangeKind
    path: str

    def __str__(self) -> str:
        return f"{self.path} {self.kind.value}"


def ignored(rel_parts: tuple[str, ...], *, authored: bool = False) -> bool:
    """Whether a path (as parts relative to the skill folder) is outside the content."""
    name = rel_parts[-1]
    if name in _IGNORED_FILES or (len(rel_parts) == 1 and name.startswith(f".{BENCHMARKS}.")):
        return True
    return authored and (any(p in _TOOL_DIRS for p in rel_parts) or name.endswith(".pyc"))


def content_paths(folder: Path, *, authored: bool = False
                  ) -> Iterator[tuple[str, os.DirEntry[str]]]:
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
                if ignored(rel, authored=authored):
                    continue
                if entry.is_dir(follow_symlinks=False):
                    stack.append((rel, entry.path))
                else:
                    found.append(("/".join(rel), entry))
    found.sort(key=lambda item: item[0])
    yield from found


def hash_bytes(data: bytes) -> str:
    return PREFIX + hashlib.sha256(data).hexdigest()


def version_tests(data: bytes) -> bytes | None:
    """The part of benchmarks.json's bytes ``data`` a version holds: its skill and test
    cases as canonical JSON (key order and layout do not count, and the stored bytes
    are a benchmarks.json that loads alone), or None when it has no test cases. Bytes
    that are not a JSON object count as they are (such a file does not validate)."""
    try:
        doc = json.loads(data)
    except (UnicodeDecodeError, ValueError):
        return data
    if not isinstance(doc, dict):
        return data
    return _doc_tests(doc)


def _doc_tests(doc: Mapping[str, Any]) -> bytes | None:
    """``version_tests`` of a benchmarks.json already parsed."""
    if not doc.get("tests"):
        return None
    kept = {key: doc[key] for key in VERSION_KEYS if key in doc}
    return (json.dumps(kept, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()


def _content(rel: str, entry: os.DirEntry[str]) -> bytes | None:
    """The bytes of one content file as a version holds them (None: not content)."""
    if entry.is_symlink():
        return b"symlink:" + os.fsencode(Path(entry.path).readlink())
    data = Path(entry.path).read_bytes()
    return version_tests(data) if rel == BENCHMARKS else data


def _executable(rel: str, st: os.stat_result) -> bool:
    # benchmarks.json's mode is the rewriting worker's (mkstemp makes 0600), not content.
    return stat.S_ISREG(st.st_mode) and bool(st.st_mode & 0o111) and rel != BENCHMARKS


def file_entry(rel: str, entry: os.DirEntry[str]) -> tuple[FileEntry, bytes] | None:
    """One content file and its bytes as a version holds them (None: not content)."""
    data = _content(rel, entry)
    if data is None:
        return None
    st = entry.stat(follow_symlinks=False)
    return FileEntry(rel, hash_bytes(data), len(data), executable=_executable(rel, st),
                     symlink=stat.S_ISLNK(st.st_mode)), data


def _streamed(rel: str, entry: os.DirEntry[str]) -> FileEntry | None:
    """As ``file_entry``, reading a plain file in chunks rather than whole."""
    st = entry.stat(follow_symlinks=False)
    if stat.S_ISLNK(st.st_mode) or rel == BENCHMARKS:
        found = file_entry(rel, entry)
        return found[0] if found is not None else None
    digest = hashlib.sha256()
    size = 0
    with Path(entry.path).open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return FileEntry(rel, PREFIX + digest.hexdigest(), size, executable=_executable(rel, st))


def folder_files(folder: Path, *, authored: bool = False) -> dict[str, FileEntry]:
    """Every content file of ``folder`` with its hash, by relative path."""
    files = {}
    for rel, entry in content_paths(folder, authored=authored):
        found = _streamed(rel, entry)
        if found is not None:
            files[rel] = found
    return files


def fingerprints(files: Mapping[str, FileEntry]) -> dict[str, str]:
    return {path: f.fingerprint for path, f in files.items()}


def folder_hash(file_prints: Mapping[str, str]) -> str:
    """The hash of a whole folder from ``{relative path: fingerprint}`` (any order)."""
    digest = hashlib.sha256()
    for rel in sorted(file_prints):
        digest.update(rel.encode("utf-8", "surrogateescape") + b"\0")
        digest.update(file_prints[rel].encode("ascii") + b"\n")
    return PREFIX + digest.hexdigest()


def hash_folder(folder: Path, *, authored: bool = False) -> str:
    return folder_hash(fingerprints(folder_files(folder, authored=authored)))


def _change(path: str, was: str, now: str) -> Change:
    if was.removesuffix(EXECUTABLE) != now.removesuffix(EXECUTABLE):
        return Change(ChangeKind.CHANGED, path)
    executable = now.endswith(EXECUTABLE)
    return Change(ChangeKind.MADE_EXECUTABLE if executable else ChangeKind.NOT_EXECUTABLE,
                  path)


def changes(expected: Mapping[str, str], actual: Mapping[str, str]) -> list[Change]:
    """What differs between two ``{path: fingerprint}`` maps, sorted by path: changed
    files (bytes or executable bit), files only in ``actual`` (added) and files only in
    ``expected`` (removed)."""
    found = [_change(p, expected[p], actual[p]) for p in expected
             if p in actual and actual[p] != expected[p]]
    found += [Change(ChangeKind.ADDED, p) for p in actual if p not in expected]
    found += [Change(ChangeKind.REMOVED, p) for p in expected if p not in actual]
    return sorted(found, key=lambda c: (c.path, c.kind.value))


@dataclass(frozen=True, slots=True)
class Signature:
    """What shows cheaply that a folder may have changed since it was hashed.

    ``stats``: (path, size, mode, mtime_ns, ctime_ns) of every content file but
    benchmarks.json; any write, replacement, chmod, addition or removal changes one.
    ``tests``: the fingerprint of benchmarks.json's test cases, read each time: its
    times change after every run, which would otherwise mean hashing the whole folder
    again after every run.
    """

    stats: tuple[tuple[str, int, int, int, int], ...]
    tests: str | None

    @property
    def newest_ns(self) -> int:
        return max((max(mtime, ctime) for *_, mtime, ctime in self.stats), default=0)


# benchmarks.json's test-case fingerprint by the file's identity and times: workers
# rewrite the file once per settled step, not per item, so the items of a fan-out read
# and parse it once. Only a file older than TESTS_RACY_NS is remembered (a rewrite within
# the file clock's tick can keep its size and times), as git does for its index.
_tests_memo: dict[tuple[str, int, int, int, int], str | None] = {}
TESTS_RACY_NS = 1_000_000_000
_TESTS_MEMO_MAX = 4096


def remember_tests(path: Path, doc: Mapping[str, Any], size: int) -> None:
    """``doc`` was just written to the benchmarks.json at ``path`` (``size`` bytes,
    renamed into place): its test-case fingerprint, remembered by the new file's
    identity and times, so that the next ``stat_signature`` in this process need not
    read the file back (a worker rewrites it after every run; read back, it was parsed
    again on the path of the next step of that skill). Unlike a file read (the racy
    rule in ``_tests_print``), the writer knows the bytes behind these times: only an
    edit in place within the file clock's tick of the rename, keeping the size, would
    go unseen, and only until the next rewrite (editors and skillq replace the file
    whole, which gives it another identity)."""
    try:
        st = path.lstat()
    except OSError:
        return
    if st.st_size != size:  # replaced meanwhile: read as any file is
        return
    tests = _doc_tests(doc)
    if len(_tests_memo) >= _TESTS_MEMO_MAX:
        _tests_memo.clear()
    _tests_memo[(str(path), st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)] = \
        None if tests is None else fingerprint(hash_bytes(tests), executable=False)


def _tests_print(rel: str, entry: os.DirEntry[str]) -> str | None:
    st = entry.stat(follow_symlinks=False)
    key = (entry.path, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    if key in _tests_memo:
        return _tests_memo[key]
    found = file_entry(rel, entry)
    tests = found[0].fingerprint if found is not None else None
    if max(st.st_mtime_ns, st.st_ctime_ns) < time.time_ns() - TESTS_RACY_NS:
        if len(_tests_memo) >= _TESTS_MEMO_MAX:
            _tests_memo.clear()
        _tests_memo[key] = tests
    return tests


def stat_signature(folder: Path) -> Signature:
    stats, tests = [], None
    for rel, entry in content_paths(folder):
        if rel == BENCHMARKS and not entry.is_symlink():
            tests = _tests_print(rel, entry)
            continue
        st = entry.stat(follow_symlinks=False)
        stats.append((rel, st.st_size, st.st_mode, st.st_mtime_ns, st.st_ctime_ns))
    return Signature(tuple(stats), tests)
