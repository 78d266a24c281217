"""The progress bar a followed run shows on stderr, for the direct path (run_cmds.py) and
the thin client of the local API (run_client.py) alike: one look, whichever way; and
the one an eval shows over its many runs, with what they spent (`skillq eval`)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping

from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from orchestrator.cli.common import err

Show = Callable[[int, int, Mapping[str, int]], None]  # (total, done, counts by state)
Spent = Callable[[int, int, float], None]  # (runs ended, runs planned, USD spent)


@contextlib.contextmanager
def progress_bar(run_id: str, quiet: bool) -> Iterator[Show]:
    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
               TextColumn("{task.completed}/{task.total}"), TimeElapsedColumn())
    with Progress(*columns, console=err, transient=False, disable=quiet) as bar:
        task = bar.add_task(f"{run_id}", total=None)

        def show(total: int, done: int, counts: Mapping[str, int]) -> None:
            detail = ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "starting"
            bar.update(task, total=total or None, completed=done,
                       description=f"{run_id}: {detail}")

        yield show


@contextlib.contextmanager
def spend_bar(label: str) -> Iterator[Spent]:
    columns = (TextColumn("{task.description}"), BarColumn(),
               TextColumn("{task.completed}/{task.total} runs · ${task.fields[spent]:.4f}"),
               TimeElapsedColumn())
    with Progress(*columns, console=err, transient=True) as bar:
        task = bar.add_task(label, total=None, spent=0.0)

        def show(done: int, total: int, spent: float) -> None:
            bar.update(task, completed=done, total=total, spent=spent)

        yield show
