"""A published version's folder rebuilt from the shared store, under
``SKILLQ_HOME/published/NAME/V/NAME`` (read-only, verified before every use, rebuilt if
damaged): what a worker runs for a pin to another version or for a production step whose
vault folder holds a draft, and what `skillq run` plans a draft orchestrator's
production run from."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

from shared.db.session import transaction
from shared.errors import FolderChanged
from shared.published import PublishedFiles, materialise, verify
from shared.readonly import make_writable
from shared.skill import Skill, load_skill

PUBLISHED_DIR = "published"

_lock = threading.Lock()
_loaded: dict[Path, Skill] = {}  # rebuilt published folders, parsed once (they never change)


def published_copy(home: Path, database_url: str, files: PublishedFiles) -> Skill:
    """The skill of ``files``' version, from its copy under ``home``; FolderChanged when
    the store's own files are damaged."""
    dest = home.expanduser().resolve() / PUBLISHED_DIR / files.skill / str(files.version) \
        / files.skill
    if dest.is_dir() and verify(dest, files):
        # A damaged copy (edited by hand, a disk error): rebuild it from the store.
        with _lock:
            _loaded.pop(dest, None)
        make_writable(dest)
        shutil.rmtree(dest)
    if not dest.is_dir():
        with transaction(database_url) as session:
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
