"""The report: the rich table, the printed breakdowns and the JSON results."""

from __future__ import annotations

import json
import os
import platform
import socket
import subprocess
from collections.abc import Sequence
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import Any

from rich.table import Table

from .config import (
    FANOUT_POLL_S,
    LATENCY_POLL_S,
    RESULTS,
    ROOT,
    console,
)
from .figure import Figure


def fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit in ("items/s", "rows/s"):
        return f"{value:,.0f} {unit}"
    if unit == "s":
        return f"{value:.2f} s"
    return f"{value:,.2f} {unit}"


def render(figures: Sequence[Figure]) -> Table:
    table = Table(title="skillq execution vs raw Celery (same broker, same run)")
    for column, justify in (("figure", "left"), ("skillq", "right"), ("raw Celery", "right"),
                            ("ratio", "right"), ("target", "left"), ("", "center"),
                            ("note", "left")):
        table.add_column(column, justify=justify, overflow="fold")  # type: ignore[arg-type]
    for f in figures:
        verdict = {True: "[green]pass[/]", False: "[red]FAIL[/]", None: "[dim]info[/]"}[f.passed]
        table.add_row(f"({f.key}) {f.name}", fmt(f.skillq, f.unit), fmt(f.raw, f.unit),
                      "-" if f.ratio is None else f"{f.ratio:.2f}x", f.target, verdict,
                      f.note)
    return table


def source_state() -> dict[str, Any]:
    """Which code was measured: the commit, and the files changed on top of it."""
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}  # read-only: never touch the index
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, env=env, text=True,
                              capture_output=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=ROOT, env=env, text=True, capture_output=True,
                               timeout=10).stdout.split("\n")
    except (OSError, subprocess.SubprocessError):
        return {}
    return {"commit": head, "modified": [line[3:] for line in dirty if line.strip()]}


def machine() -> dict[str, Any]:
    import celery
    import sqlalchemy

    return {"host": socket.gethostname(), "cpus": os.cpu_count(),
            "python": platform.python_version(), "celery": celery.__version__,
            "sqlalchemy": sqlalchemy.__version__, "platform": platform.platform(),
            "load_avg_at_end": os.getloadavg()}


def print_profiles(profiles: dict[str, list[tuple[float, float, str]]]) -> None:
    for name, top in profiles.items():
        table = Table(title=f"py-spy, skillq worker + pool children: {name}")
        for column in ("incl %", "self %", "frame"):
            table.add_column(column, justify="left" if column == "frame" else "right")
        for incl, own, frame in top:
            table.add_row(f"{incl:.1f}", f"{own:.1f}", frame)
        console.print(table)


def print_phases(figures: Sequence[Figure]) -> None:
    phases = next((f.samples.get("skillq_phases_ms") for f in figures if f.key == "a"), None)
    if phases:
        console.print("[bold]one-step run (a), median ms per phase, from its records:[/]")
        for name, ms in phases.items():
            console.print(f"  {ms:8.2f}  {name}")


def write_results(figures: Sequence[Figure], *, started: datetime, quick: bool,
                  interrupted: bool, cfg: dict[str, Any],
                  load_at_start: tuple[float, float, float], source: dict[str, Any],
                  embedded: bool, kind: str = "execution",
                  extra: dict[str, Any] | None = None) -> Path:
    """benchmarks/results/<kind>-<date>.json, with every sample (and ``extra``'s keys)."""
    RESULTS.mkdir(exist_ok=True)
    suffix = ("-quick" if quick else "") + ("-partial" if interrupted else "")
    path = RESULTS / f"{kind}-{started:%Y-%m-%d-%H%M%S}{suffix}.json"
    path.write_text(json.dumps({
        "started": started.isoformat(), "quick": quick, "interrupted": interrupted,
        "config": cfg, "machine": {**machine(), "load_avg_at_start": load_at_start},
        "source": source,
        "embedded": embedded, "poll_s": {"latency": LATENCY_POLL_S,
                                         "fanout": FANOUT_POLL_S},
        # Since 2026-12-05 (a)'s raw side waits by AsyncResult.get(); before, polled.
        "raw_latency_wait": "AsyncResult.get",
        **(extra or {}), "figures": [asdict(f) for f in figures]}, indent=2,
        default=str) + "\n")
    console.print(f"results: {path.relative_to(ROOT)}")
    return path
