"""Where a build's drafts are written while it runs: a flat vault of their own
(``<home>/builds/<run>/``) on the machine building them. Their test cases run through
the queues from it, and no half-built skill is ever in the caller's vault: a draft
leaves through the artifact store (shared/folder_store.py) once built."""

from __future__ import annotations

from pathlib import Path


def build_root(home: Path, build_id: str) -> Path:
    return home / "builds" / build_id


def draft_folder(home: Path, build_id: str, skill: str) -> Path:
    return build_root(home, build_id) / skill
