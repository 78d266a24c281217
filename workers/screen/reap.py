"""Ending every process a screen step started, browsers included.

Playwright starts Chromium in a session of its own, out of reach of the host's process
group, so the step's timeout kill cannot reach it. Every process of a step inherits a
unique tag in its environment; after the step, whatever still carries it is killed.
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

TAG_VAR = "SKILLQ_SCREEN_TAG"


def reap(tag: str) -> list[int]:
    """SIGKILL the process groups of processes whose environment holds ``tag``."""
    marker = f"{TAG_VAR}={tag}".encode()
    killed = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if marker in environ.split(b"\0"):
            pid = int(entry.name)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(os.getpgid(pid), signal.SIGKILL)
                killed.append(pid)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
    return killed
