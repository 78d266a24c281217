"""A skill folder through the artifact store: its files stored content-addressed, and
the folder's hash (shared/folderhash.py) to check them against where they land. A skill
build's drafts travel this way from the machine that built them to the caller's vault."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from shared.folderhash import content_paths, hash_folder
from shared.store import get_bytes, media_type_for, put_bytes


class FolderMismatch(Exception):
    """The files written do not make the folder that was stored."""


def pack_folder(session: Session, folder: Path) -> dict[str, Any]:
    """{"hash": the folder's hash, "files": {path: key}, "executable": [paths]}."""
    files, executable = {}, []
    for rel, entry in content_paths(folder):
        path = Path(entry.path)
        files[rel] = put_bytes(session, path.read_bytes(), media_type_for(rel))
        if os.access(path, os.X_OK):
            executable.append(rel)
    return {"hash": hash_folder(folder), "files": files, "executable": executable}


def file_text(session: Session, packed: dict[str, Any], rel: str) -> str | None:
    key = (packed.get("files") or {}).get(rel)
    return get_bytes(session, key).decode("utf-8", "replace") if key else None


def unpack_folder(session: Session, packed: dict[str, Any], dest: Path) -> None:
    """Write the stored folder at ``dest`` (new) and check it hashes as stored."""
    dest.mkdir(parents=True)
    for rel, key in sorted((packed.get("files") or {}).items()):
        target = dest / rel
        if not target.resolve().is_relative_to(dest.resolve()):
            raise FolderMismatch(f"{rel} is outside the folder")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(get_bytes(session, key))
        if rel in (packed.get("executable") or ()):
            target.chmod(0o755)
    if hash_folder(dest) != packed.get("hash"):
        raise FolderMismatch(f"{dest.name}: its files do not hash as stored "
                             f"({packed.get('hash')})")
