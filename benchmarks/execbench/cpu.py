"""CPU accounting: CPU seconds of each process group, read from /proc."""

from __future__ import annotations

import os
from pathlib import Path

TICK_S = 1 / os.sysconf("SC_CLK_TCK")


def _proc_table() -> dict[int, tuple[str, int, float]]:
    """pid -> (command name, parent pid, CPU seconds of it and its reaped children)."""
    table = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "stat").read_text()
        except OSError:
            continue
        name = raw[raw.index("(") + 1:raw.rindex(")")]
        fields = raw[raw.rindex(")") + 2:].split()
        # fields[1] ppid; [11..14] utime stime cutime cstime
        ticks = sum(int(x) for x in fields[11:15])
        table[int(entry.name)] = (name, int(fields[1]), ticks * TICK_S)
    return table


class CpuMeter:
    """CPU seconds spent by the servers, each worker (with its pool children and the
    processes they spawned and reaped) and this client, between start() and stop()."""

    def __init__(self, workers: dict[str, int]) -> None:
        self.workers = workers

    def _sample(self) -> dict[str, float]:
        table, out = _proc_table(), {}
        for pid, (name, ppid, cpu) in table.items():
            if name.startswith("postgres"):
                group_name = "postgres"
            elif name.startswith("redis-server"):
                group_name = "redis"
            elif pid == os.getpid():
                group_name = "client"
            else:
                group_name = next((w for w, wpid in self.workers.items()
                                   if wpid in (pid, ppid)), "")
            if group_name:
                out[group_name] = out.get(group_name, 0.0) + cpu
        return out

    def __enter__(self) -> CpuMeter:
        self.before = self._sample()
        return self

    def __exit__(self, *exc: object) -> None:
        after = self._sample()
        self.used = {k: round(after.get(k, 0.0) - self.before.get(k, 0.0), 2)
                     for k in sorted(set(after) | set(self.before))}

    def only(self, *groups: str) -> dict[str, float]:
        return {k: v for k, v in self.used.items() if k in groups and v > 0}
