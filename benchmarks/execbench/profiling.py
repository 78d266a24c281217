"""Profiling the skillq worker with py-spy, and its hotspots."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from .bench import Bench
from .config import (
    console,
)


def profile(b: Bench, worker: int, out: Path, width: int
            ) -> dict[str, list[tuple[float, float, str]]]:
    """One fan-out of each kind under py-spy: on-CPU samples, then with idle ones (waits)."""
    if _py_spy() is None:
        console.print("[yellow]py-spy not found: pip install py-spy into the venv[/]")
        return {}
    found = {}
    for skill in ("fan-cached", "fan-true"):
        for idle in (False, True):
            label = f"{skill}-x{width}{'-idle' if idle else ''}"
            with py_spy(worker, out, label, idle=idle):
                b.skillq_fan(skill, width, f"py-spy {label}")
            if (out / f"{label}.txt").exists():
                found[label] = hotspots(out / f"{label}.txt")
    return found


def _py_spy() -> str | None:
    return shutil.which("py-spy", path=os.pathsep.join(
        [str(Path(sys.executable).parent), os.environ.get("PATH", "")]))


@contextlib.contextmanager
def py_spy(pid: int | None, out: Path | None, label: str, idle: bool = False
           ) -> Iterator[None]:
    """Record the skillq worker and its pool children with py-spy while the block runs
    (collapsed stacks, one line per stack: ``frame;frame;... count``)."""
    exe = _py_spy()
    if pid is None or out is None or exe is None:
        yield
        return
    out.mkdir(parents=True, exist_ok=True)
    argv = [exe, "record", "--pid", str(pid), "--subprocesses", "--rate", "250", "--format",
            "raw", "--output", str(out / f"{label}.txt"), "--nonblocking"]
    proc = subprocess.Popen(argv + (["--idle"] if idle else []), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    time.sleep(1.5)  # attaching
    try:
        yield
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


PROJECT_FRAME = re.compile(r"\((shared|orchestrator|workers)/")
WATCHED = ("do_ping", "SessionTransaction.commit", "EventDispatcher.publish",
           "Connection._recv (billiard", "QoS", "basic_ack")


def hotspots(path: Path, top: int = 18) -> list[tuple[float, float, str]]:
    """(inclusive %, self %, frame) from a collapsed-stack file: skillq's own functions
    first, then a few library frames worth watching, then the hottest leaves. Percentages
    are of all samples of the worker (its main process and pool children)."""
    inclusive: dict[str, int] = {}
    own: dict[str, int] = {}
    total = 0
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = [re.sub(r":\d+\)$", ")", f) for f in stack.split(";")]
        for frame in set(frames):
            inclusive[frame] = inclusive.get(frame, 0) + n
        own[frames[-1]] = own.get(frames[-1], 0) + n
    if not total:
        return []
    ranked = sorted(inclusive.items(), key=lambda kv: -kv[1])
    ours = [(f, n) for f, n in ranked if PROJECT_FRAME.search(f)
            and not f.startswith(("<module>", "main "))][:top]
    watched = [(f, n) for f, n in ranked if f.startswith(WATCHED)][:8]
    leaves = sorted(own.items(), key=lambda kv: -kv[1])[:10]
    rows = [(100 * n / total, 100 * own.get(f, 0) / total, f) for f, n in ours + watched]
    return rows + [(100 * inclusive[f] / total, 100 * n / total, f"leaf: {f}")
                   for f, n in leaves]
