"""Finding and killing processes by a variable in their environment (Linux /proc).

A step's processes carry a tag in their environment that survives a new session or a
dead parent, so whatever is left of a step can be found and ended afterwards.
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path


def kill_tagged(var: str, value: str, *, prefix: bool = False) -> list[int]:
    """SIGKILL the process groups (and the processes) whose environment holds
    ``var=value`` (``prefix``: a value starting with ``value``); their pids."""
    marker = f"{var}={value}".encode()
    killed = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        found = environ.split(b"\0")
        if any(v.startswith(marker) for v in found) if prefix else marker in found:
            pid = int(entry.name)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(os.getpgid(pid), signal.SIGKILL)
                killed.append(pid)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)  # one that left its group
    return killed
