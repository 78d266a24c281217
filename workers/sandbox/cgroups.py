"""One cgroup per sandbox (so per worker process, whose steps run one at a time): it holds
a step's memory and process count, counts when either limit was hit, and ends every
process in it. cgroup v2 (one tree) and v1 (a tree per controller) both; root only.

The sandbox's launcher and everything it starts live in the group, so the group's
limits are set again before each step (written when they change), and its counters read
before and after."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path

from workers.sandbox.limits import MB, Breaches

ROOT = Path("/sys/fs/cgroup")
GROUP = "skillq"
# The launcher, bubblewrap's own process and a little slack: not the step's to use.
OVERHEAD_PIDS = 4


def _v2() -> bool:
    return (ROOT / "cgroup.controllers").is_file()


def available() -> bool:
    if os.geteuid() != 0:
        return False
    if _v2():
        return os.access(ROOT, os.W_OK) and {"pids", "memory"} <= set(
            (ROOT / "cgroup.controllers").read_text().split())
    return all(os.access(ROOT / c, os.W_OK) for c in ("pids", "memory"))


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _counter(text: str, key: str) -> int:
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name == key:
            with contextlib.suppress(ValueError):
                return int(value)
    return 0


class _Knob:
    """One file of the group, kept open: a step reads its counters and sets its limits
    through a pread or a pwrite rather than an open, a read and a close each (much
    quicker), and a limit is written only when it changes."""

    def __init__(self, path: Path, *, writable: bool) -> None:
        self.path, self.writable = path, writable
        self.fd: int | None = None
        self.written: str | None = None

    def _open(self) -> int:
        if self.fd is None:
            self.fd = os.open(self.path, (os.O_WRONLY if self.writable else os.O_RDONLY)
                              | os.O_CLOEXEC)
        return self.fd

    def read(self) -> str:
        try:
            return os.pread(self._open(), 4096, 0).decode()
        except OSError:
            return ""

    def write(self, value: str) -> None:
        if value != self.written:
            self.written = None  # unknown until the kernel took it
            os.pwrite(self._open(), value.encode(), 0)
            self.written = value

    def close(self) -> None:
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = None


class Cgroup:
    def __init__(self, name: str) -> None:
        if _v2():
            parent = ROOT / GROUP
            parent.mkdir(exist_ok=True)
            with contextlib.suppress(OSError):  # already on, or set by the admin
                (parent / "cgroup.subtree_control").write_text("+pids +memory")
            self.dirs = {"pids": parent / name, "memory": parent / name}
        else:
            self.dirs = {c: ROOT / c / GROUP / name for c in ("pids", "memory")}
        for path in set(self.dirs.values()):
            path.mkdir(parents=True, exist_ok=True)
        self.v2 = _v2()
        self.pids_max = _Knob(self._file("pids", "pids.max", "pids.max"), writable=True)
        self.memory_max = _Knob(self._file("memory", "memory.limit_in_bytes", "memory.max"),
                                writable=True)
        self.pids_current = _Knob(self.dirs["pids"] / "pids.current", writable=False)
        self.pids_events = _Knob(self._file("pids", "pids.events", "pids.events"),
                                 writable=False)
        self.memory_events = _Knob(
            self._file("memory", "memory.oom_control", "memory.events"), writable=False)
        self.swap_max = _Knob(self.dirs["memory"] / "memory.swap.max", writable=True)

    def _file(self, controller: str, v1: str, v2: str) -> Path:
        return self.dirs[controller] / (v2 if self.v2 else v1)

    @contextlib.contextmanager
    def joined(self) -> Iterator[None]:
        """This process inside the group while it starts the sandbox, which then stays."""
        own = {c: _own_group(c, self.v2) for c in self.dirs}
        for path in set(self.dirs.values()):
            (path / "cgroup.procs").write_text(str(os.getpid()))
        try:
            yield
        finally:
            for back in set(own.values()):
                if back is not None:
                    with contextlib.suppress(OSError):
                        (back / "cgroup.procs").write_text(str(os.getpid()))

    def set_limits(self, memory_mb: int, processes: int) -> None:
        try:
            current = int(self.pids_current.read().strip() or 0)
        except ValueError:
            current = 0
        self.pids_max.write(str(processes + max(current, OVERHEAD_PIDS)))
        self.memory_max.write(str(memory_mb * MB))
        if self.v2:
            with contextlib.suppress(OSError):  # no swap beyond the limit either
                self.swap_max.write("0")

    def lift_limits(self) -> None:
        self.pids_max.write("max")
        self.memory_max.write("-1" if not self.v2 else "max")

    def counters(self) -> tuple[int, int]:
        """(times the process limit refused a fork, processes the OOM killer ended)."""
        return (_counter(self.pids_events.read(), "max"),
                _counter(self.memory_events.read(), "oom_kill"))

    @staticmethod
    def breaches(before: tuple[int, int], after: tuple[int, int]) -> Breaches:
        return Breaches(processes=after[0] > before[0], memory=after[1] > before[1])

    def procs(self) -> list[int]:
        text = _read(self.dirs["pids"] / "cgroup.procs")
        return [int(p) for p in text.split()]

    def kill_all(self) -> None:
        for pid in self.procs():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)

    def remove(self) -> None:
        for knob in (self.pids_max, self.memory_max, self.pids_current, self.pids_events,
                     self.memory_events, self.swap_max):
            knob.close()
        for path in set(self.dirs.values()):
            with contextlib.suppress(OSError):
                path.rmdir()


def _own_group(controller: str, v2: bool) -> Path | None:
    for line in _read(Path("/proc/self/cgroup")).splitlines():
        _, names, path = line.split(":", 2)
        if (v2 and names == "") or (not v2 and controller in names.split(",")):
            return (ROOT / path.lstrip("/")) if v2 else (ROOT / controller / path.lstrip("/"))
    return None


def remove_stale() -> None:
    """Groups of sandboxes whose worker process is gone (named p<pid>; empty ones only)."""
    bases = [ROOT / GROUP] if _v2() else [ROOT / c / GROUP for c in ("pids", "memory")]
    for base in bases:
        for path in base.glob("p*") if base.is_dir() else ():
            owner = path.name[1:]
            if owner.isdigit() and Path(f"/proc/{owner}").exists():
                continue  # its process lives (maybe another worker's: same name scheme)
            if path.is_dir() and not _read(path / "cgroup.procs").strip():
                with contextlib.suppress(OSError):
                    path.rmdir()
