"""`python` and `python3` for a step: this worker's own interpreter, first on the step's
PATH (or, where the step's account cannot reach it, the system's python3). Agent Skills
folders and most people write `python script.py`, and Debian has no `python` at all. A
skill that wants another interpreter names another program (`python3.12`, `pypy3`) or
runs its script by its own `#!` line (`./main.py`) (docs/script-protocol.md)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

NAMES = ("python", "python3")
FOLDER = "bin"  # under the step's scratch folder, which the sandbox shows it


def first_on_path(scratch: Path, path: str) -> str:
    """``path`` (a PATH value) with a folder of this interpreter's names in front, made
    in ``scratch``."""
    folder = scratch / FOLDER
    folder.mkdir(mode=0o755, exist_ok=True)
    # A script, not a link: a venv's interpreter finds its packages by the path it was
    # started as, and a link from elsewhere would start the base interpreter instead.
    # Without bubblewrap a step's account may not reach it (an interpreter under root's
    # home): then the next python3 on PATH, as before this folder was put in front.
    worker = shlex.quote(sys.executable)
    text = (f"#!/bin/sh\n[ -x {worker} ] && exec {worker} \"$@\"\n"
            "PATH=${PATH#*:}; export PATH\nexec python3 \"$@\"\n")
    for name in NAMES:
        shim = folder / name
        shim.write_text(text)
        shim.chmod(0o755)
    return f"{folder}:{path}"
