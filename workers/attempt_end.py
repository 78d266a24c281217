"""The end of a step attempt, however it ends: nothing it started outlives it.

Every end (success, failure, timeout, a retry to come, the loss of its process) kills
every process the attempt started and removes its scratch folder. Two ways find them:

- In a pool process, the process is a child subreaper (prctl PR_SET_CHILD_SUBREAPER):
  a script's descendants that escape its process group (``setsid``, a daemonizing
  child) are re-parented to the pool process when their parent dies, so whatever is
  still a child of the pool process after a step is that step's leftover, found in
  /proc/self/task/*/children at no cost (a pool process runs one step at a time).
- When the pool process itself died, its main process finds the attempt's processes by
  the tag in their environment (STEP_MARKER), a scan of /proc, only in that rare case.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import shutil
import signal
import stat
from pathlib import Path

from workers import sandbox as sandboxes
from workers.proc_tags import kill_tagged
from workers.sandbox.runner import scratch_root, slot_dir

STEP_MARKER = "SKILLQ_STEP_RUN"  # in each script's environment: finds it after a crash
PR_SET_CHILD_SUBREAPER = 36
SWEEP_ROUNDS = 8  # each round kills the children; their own children surface next round
_reaping = False


def become_subreaper() -> bool:
    """Make this process the reaper of its orphaned descendants (Linux); True if so."""
    global _reaping
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        _reaping = libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        _reaping = False
    return _reaping


def _scratch_name(row_id: str) -> str:
    return f"skillq-step-{hashlib.sha256(row_id.encode()).hexdigest()[:24]}"


def scratch_for(row_id: str) -> Path:
    """The attempt's scratch folder: named after it, so whoever ends it can find it, in
    this process's slot (the part of /tmp this process's sandboxed steps can see)."""
    return slot_dir() / _scratch_name(row_id)


def _scratch_anywhere(row_id: str) -> list[Path]:
    """The attempt's scratch folders in any process's slot (that process may be gone)."""
    name = _scratch_name(row_id)
    return [p for pattern in (name, name + "-screen")
            for p in scratch_root().glob(f"*/{pattern}")]


def _children() -> list[int]:
    found: list[int] = []
    for task in Path("/proc/self/task").glob("*"):
        with contextlib.suppress(OSError, ValueError):
            found += [int(p) for p in (task / "children").read_text().split()]
    return found


def sweep_children() -> list[int]:
    """Kill and reap every child of this subreaper process (its step's leftovers), but for
    its sandbox launchers (workers/sandbox/): they outlive steps, and end what those
    started themselves."""
    if not _reaping:
        return []
    keep = set(sandboxes.launcher_pids())
    killed: list[int] = []
    for _ in range(SWEEP_ROUNDS):
        pids = [p for p in _children() if p not in keep]
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        for pid in pids:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
        killed += pids
    return killed


def remove_scratch(path: Path) -> None:
    for part in [path, *path.rglob("*")] if path.exists() else []:
        with contextlib.suppress(OSError):  # a 0444 copy of a read-only vault
            mode = part.lstat().st_mode
            if stat.S_ISDIR(mode):
                part.chmod(mode | 0o700)
    shutil.rmtree(path, ignore_errors=True)


def end(row_id: str, *, by_tag: bool = False) -> list[int]:
    """Kill what attempt ``row_id`` left running and remove its scratch folder; pids."""
    killed = kill_tagged(STEP_MARKER, row_id) if by_tag else sweep_children()
    if by_tag:  # in the worker's main process: the attempt ran in a pool process's slot
        for found in _scratch_anywhere(row_id):
            remove_scratch(found)
        return killed
    scratch = scratch_for(row_id)
    remove_scratch(scratch)
    remove_scratch(scratch.with_name(scratch.name + "-screen"))  # a screen host's folder
    return killed
