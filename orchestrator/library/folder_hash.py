"""The content hash of a skill folder: what the defaults reconciler compares.

Only what a person writes counts: every file by relative path and bytes, except
caches (__pycache__, *.pyc) and the run window of benchmarks.json, which workers rewrite
after every run (its test cases do count).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

_SKIPPED_DIRS = frozenset({"__pycache__", "node_modules", ".git"})
BENCHMARKS = "benchmarks.json"


def folder_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*")
                  if p.is_file() and not _SKIPPED_DIRS & set(p.relative_to(folder).parts)
                  and p.suffix != ".pyc")


def _content(folder: Path, path: Path) -> bytes:
    data = path.read_bytes()
    if path.parent == folder and path.name == BENCHMARKS:
        try:
            tests = json.loads(data).get("tests", [])
        except (ValueError, AttributeError):
            return data  # not the JSON we expect: hash it as it is
        return json.dumps(tests, sort_keys=True, separators=(",", ":")).encode()
    return data


def folder_hash(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in folder_files(folder):
        rel = path.relative_to(folder).as_posix()
        digest.update(rel.encode() + b"\0")
        digest.update(hashlib.sha256(_content(folder, path)).digest())
    return "sha256:" + digest.hexdigest()
