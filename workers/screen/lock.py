"""One browser or desktop interaction at a time per machine.

Workers of the dom0 and cmd0 classes run at concurrency 1, but two of them started on
one machine by mistake would still share the screen. Each step holds a file lock under
SKILLQ_HOME/locks/ (the same SKILLQ_HOME is the same machine) while it runs; the time it
waited is recorded with the step. The lock is an flock: a worker that dies releases it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

from filelock import FileLock, Timeout


class LockTimeout(Exception):
    """The machine's screen stayed busy longer than a step may wait."""


@contextlib.contextmanager
def machine_lock(home: Path, name: str, *, timeout_s: float) -> Iterator[float]:
    """Hold ``<home>/locks/<name>.lock``; yields how long it took to get, in ms."""
    path = home / "locks" / f"{name}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(path), thread_local=False)
    start = time.monotonic()
    try:
        lock.acquire(timeout=timeout_s, poll_interval=0.05)
    except Timeout:
        raise LockTimeout(f"the {name} lock ({path}) stayed taken for {timeout_s:g} s: "
                          "another step on this machine holds the screen") from None
    try:
        yield (time.monotonic() - start) * 1000
    finally:
        lock.release()
