"""Peak resident memory of process groups while something runs, sampled from /proc."""

from __future__ import annotations

import os
import threading
from pathlib import Path

PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024


def _rss_kb(pid: int) -> int:
    try:  # statm's second field: resident pages (cheaper to read than status)
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE_KB
    except (OSError, ValueError, IndexError):
        return 0


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            found += [int(c) for c in task.read_text().split()]
        except (OSError, ValueError):
            continue
    return found


class RssMeter:
    """Peak RSS (MiB) of each named group between __enter__ and __exit__: a group is a
    process and its direct children (a worker's pool), summed, sampled every
    ``every_s``; also each group's RSS when sampling started."""

    def __init__(self, groups: dict[str, int], every_s: float = 0.1) -> None:
        self.groups = groups
        self.every_s = every_s
        self.peak: dict[str, float] = {}
        self.start: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="rss-meter", daemon=True)

    def _sample(self) -> dict[str, float]:
        return {name: sum(_rss_kb(p) for p in (pid, *_children(pid))) / 1024
                for name, pid in self.groups.items()}

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            for name, mib in self._sample().items():
                self.peak[name] = max(self.peak.get(name, 0.0), mib)

    def __enter__(self) -> RssMeter:
        self.start = self._sample()
        self.peak = dict(self.start)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        for name, mib in self._sample().items():
            self.peak[name] = max(self.peak.get(name, 0.0), mib)
