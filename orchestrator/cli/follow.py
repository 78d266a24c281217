"""Following a run to its end, the one way `skillq run`, `wait` and `retry` do it,
whether they talk to the local API (run_client.py) or to the servers themselves
(direct_run.py): a progress bar, Ctrl-C (cancel the run, or stop following it), the
result and the exit code.

What differs between the two is behind ``FollowedRun``: how the end is waited for and
how the run is cancelled. This module imports no more than the thin client may (the
standard library, typer, rich): tests/unit/test_run_client.py holds it to that.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import typer

from orchestrator.cli import common
from shared.errors import PipelineFailed

INTERRUPTED = 130  # 128 + SIGINT: the shell's code for a command ended by Ctrl-C
CTRL_C_REASON = "cancelled: Ctrl-C on the `skillq` command following it"


@dataclass(frozen=True, slots=True)
class Ended:
    """An ended run as the person is shown it (orchestrator/run_report.py's words)."""

    state: str
    result: dict[str, Any]  # the --json object
    failure: str  # the error line of a run that did not succeed
    success: str

    @property
    def succeeded(self) -> bool:
        return self.state == "succeeded"


@dataclass(frozen=True, slots=True)
class Cancelled:
    run: Ended
    ended_now: bool  # False: it had ended before the cancel came
    stopped: int  # running steps stopped


class Lost(Exception):
    """The way a run was followed is gone (the local API stopped): ``then`` gives the
    way to follow it on."""

    def __init__(self, why: str, then: Callable[[], FollowedRun]) -> None:
        super().__init__(why)
        self.then = then


class FollowedRun(Protocol):
    run_id: str

    def wait(self, quiet: bool, on_end: Callable[[Ended], None]) -> Ended:
        """Until the run ends, with a progress bar unless ``quiet``; ``on_end`` as soon as
        it is known, before what the end still waits for (its files)."""
        ...

    def cancel(self, reason: str) -> Cancelled: ...

    def open_waits(self) -> list[dict[str, Any]]:
        """The run's open questions and approvals (cli/inline_answers.py asks them)."""
        ...

    def decide(self, wait: dict[str, Any], decision: str, body: dict[str, Any]) -> None: ...


def follow(run: FollowedRun, as_json: bool, *, cancel_on_interrupt: bool) -> None:
    """Show a run's progress until it ends, then report it (exit 0 succeeded, 1 failed or
    cancelled). Ctrl-C cancels it (``cancel_on_interrupt``), or stops following it.

    The result is shown as soon as it is read; the command returns once the run's
    benchmarks.json files show it too (written by its worker just after)."""
    shown: list[Ended] = []

    def show_end(end: Ended) -> None:
        show(end, as_json)
        shown.append(end)

    try:
        with asking(run):
            final = run.wait(as_json, show_end)
    except KeyboardInterrupt:
        if shown:  # ended and shown: only its files were still being waited for
            report(shown[0], as_json, shown=True)
            return
        if not cancel_on_interrupt:
            common.err.print(f"stopped following run {run.run_id}; it goes on (`skillq wait "
                             f"{run.run_id}`, `skillq cancel {run.run_id}`)", markup=False)
            raise typer.Exit(INTERRUPTED) from None
        final = cancel_interrupted(run)
        if final.state == "cancelled":
            if as_json:
                print_json(final)
            raise typer.Exit(INTERRUPTED) from None
    except Lost as exc:
        # The run is recorded and goes on without that way: follow it another.
        common.err.print(f"{exc}; following run {run.run_id} directly", markup=False)
        follow(exc.then(), as_json, cancel_on_interrupt=cancel_on_interrupt)
        return
    report(final, as_json, shown=bool(shown))


def asking(run: FollowedRun) -> contextlib.AbstractContextManager[object]:
    """A person at the terminal answers the run's questions and approvals as they come;
    without one (stdin not a terminal) nothing is read."""
    if not sys.stdin.isatty():
        return contextlib.nullcontext()
    from orchestrator.cli.inline_answers import InlineAnswers

    return InlineAnswers(run)


def cancel_interrupted(run: FollowedRun) -> Ended:
    """Cancel the run a Ctrl-C interrupted (a second Ctrl-C exits at once); it as it
    ended (cancelled, or otherwise when it had ended first)."""
    def at_once(signum: int, frame: Any) -> None:
        print(f"exiting; run {run.run_id} may still be running (`skillq cancel "
              f"{run.run_id}`)", file=sys.stderr, flush=True)
        os._exit(INTERRUPTED)

    signal.signal(signal.SIGINT, at_once)
    common.err.print(f"cancelling run {run.run_id} (Ctrl-C again to exit at once)",
                     markup=False)
    done = run.cancel(CTRL_C_REASON)
    if done.ended_now:
        stopped = f"; {done.stopped} running step(s) stopped" if done.stopped else ""
        common.err.print(f"run {run.run_id} cancelled{stopped}", markup=False)
    return done.run


def print_json(end: Ended) -> None:
    print(json.dumps(end.result, ensure_ascii=False))
    sys.stdout.flush()


def show(end: Ended, as_json: bool) -> None:
    """What `skillq run` prints of an ended run (a failure's line comes with its exit)."""
    if as_json:
        print_json(end)
    elif end.succeeded:
        common.err.print(end.success, style="green")
        print(json.dumps(end.result["outputs"], indent=2, ensure_ascii=False))
        sys.stdout.flush()


def report(end: Ended, as_json: bool, *, shown: bool = False) -> None:
    """Show an ended run (unless ``shown`` already) and exit as it ended."""
    if not shown:
        show(end, as_json)
    if not end.succeeded:
        raise PipelineFailed(end.failure)
