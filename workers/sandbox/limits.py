"""A step's limits: its SKILL.md's ``limits:`` over the daemon's defaults, as rlimits and
cgroup values, and the sentence that names the limit a failed step ran into."""

from __future__ import annotations

import signal
from dataclasses import dataclass

from shared.manifest import Limits
from shared.settings import Settings

MB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class StepLimits:
    memory_mb: int
    processes: int
    cpu_s: int
    file_mb: int
    open_files: int
    network: bool

    @classmethod
    def resolve(cls, declared: Limits, settings: Settings) -> StepLimits:
        def pick(name: str) -> int:
            value = getattr(declared, name)
            return int(value if value is not None else getattr(settings, f"step_{name}"))

        network = declared.network if declared.network is not None else settings.step_network
        return cls(memory_mb=pick("memory_mb"), processes=pick("processes"),
                   cpu_s=pick("cpu_s"), file_mb=pick("file_mb"),
                   open_files=pick("open_files"), network=bool(network))

    def rlimits(self, *, memory: bool, processes: bool) -> dict[str, tuple[int, int]]:
        """Per-process limits set before the command execs. ``memory``/``processes``: also
        as rlimits, where no cgroup holds them (RLIMIT_AS counts address space, not
        memory used, and RLIMIT_NPROC counts the account's processes: both are rough)."""
        # The CPU soft limit sends SIGXCPU (named in the error); the hard one a second later.
        found = {"RLIMIT_CPU": (self.cpu_s, self.cpu_s + 1),
                 "RLIMIT_FSIZE": (self.file_mb * MB, self.file_mb * MB),
                 "RLIMIT_NOFILE": (self.open_files, self.open_files),
                 "RLIMIT_CORE": (0, 0)}
        if memory:
            found["RLIMIT_AS"] = (self.memory_mb * MB, self.memory_mb * MB)
        if processes:
            found["RLIMIT_NPROC"] = (self.processes, self.processes)
        return found


@dataclass(frozen=True, slots=True)
class Breaches:
    """What the step's cgroup counted while it ran (False where there is no cgroup)."""
    memory: bool = False
    processes: bool = False


def limit_reached(limits: StepLimits, code: int | None, stderr: str,
                  breaches: Breaches) -> str | None:
    """The limit a failed step ran into, in words, or None when none is evident."""
    if breaches.memory or (code == -signal.SIGKILL and "MemoryError" in stderr):
        return f"memory limit of {limits.memory_mb} MB reached"
    if code == -signal.SIGXCPU:
        return f"CPU time limit of {limits.cpu_s} s per process reached"
    if code == -signal.SIGXFSZ or "File too large" in stderr:
        return f"file size limit of {limits.file_mb} MB reached"
    if breaches.processes or ("Resource temporarily unavailable" in stderr and (
            "fork" in stderr.lower() or "thread" in stderr.lower())):
        return f"process limit of {limits.processes} (processes and threads) reached"
    if "Too many open files" in stderr:
        return f"open-file limit of {limits.open_files} reached"
    if "MemoryError" in stderr or "Cannot allocate memory" in stderr:
        return f"memory limit of {limits.memory_mb} MB reached"
    return None
