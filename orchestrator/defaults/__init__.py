"""The default skills shipped with skillq: each sub-folder here is a skill folder.

`skillq defaults` copies them into a vault and keeps them current (orchestrator/library/
defaults.py). Changing any file of a default skill requires bumping DEFAULTS_VERSION and
adding that version's hashes to hashes.json: the reconciler and tests/unit/
test_library_defaults.py rely on a version always meaning the same content.
"""

from __future__ import annotations

import json
from pathlib import Path

DEFAULTS_VERSION = 1
DEFAULTS_DIR = Path(__file__).parent
HASHES_FILE = DEFAULTS_DIR / "hashes.json"


def shipped_folders() -> dict[str, Path]:
    """Default skill name -> its folder in the package."""
    return {p.name: p for p in sorted(DEFAULTS_DIR.iterdir())
            if p.is_dir() and (p / "SKILL.md").is_file()}


def recorded_hashes() -> dict[int, dict[str, str]]:
    """hashes.json: for every DEFAULTS_VERSION ever shipped, each default's content hash."""
    data = json.loads(HASHES_FILE.read_text(encoding="utf-8"))
    return {int(version): dict(hashes) for version, hashes in data["versions"].items()}
