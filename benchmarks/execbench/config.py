"""Paths, poll intervals, worker names, the console and the progress display the whole
benchmark shares."""

from __future__ import annotations

import sys
from pathlib import Path

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

HERE = Path(__file__).resolve().parent.parent  # benchmarks/
ROOT = HERE.parent

console = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
RESULTS = HERE / "results"
LATENCY_POLL_S = 0.002
FANOUT_POLL_S = 0.020
SETTLE_S = 0.05  # between latency samples: each starts on an idle worker
COUNTS_EVERY_S = 0.25  # `skillq run` refreshes its progress counts this often
WORKER_READY_S = 60.0
RUN_TIMEOUT_S = 900.0
SKILLQ_WORKER, RAW_WORKER, STRICT_WORKER = "bench-skillq", "bench-raw", "bench-raw-strict"
TRUE_ARGV = ["true"]
PYTHON_ARGV = ["python3", "-I", "-S", "-c", "pass"]


def progress_display() -> Progress:
    """The rich progress every benchmark shows: spinner, label, bar, done/total, time."""
    return Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                    MofNCompleteColumn(), TimeElapsedColumn(), console=console,
                    transient=False)
