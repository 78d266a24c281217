"""`skillq cancel`, `skillq wait` and `skillq retry`: what a user does with a run that is
already recorded. `wait` and `retry` follow a run as `skillq run` does (run_cmds.py)."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from orchestrator.cli.common import announce, err, out
from orchestrator.cli.follow import follow
from orchestrator.cli.run_cmds import JsonOption
from shared.errors import RunRefused

RunIdArg = Annotated[str, typer.Argument(help="The run id (`skillq runs` lists them).")]


def register(app: typer.Typer) -> None:
    app.command("cancel")(cancel)
    from orchestrator.cli.light_params import LightCommand

    app.command("wait", cls=LightCommand)(wait)  # no pydantic for the thin path
    app.command("retry")(retry)


def cancel(
    run_id: RunIdArg,
    as_json: Annotated[bool, typer.Option(
        "--json", help='Print {"run_id", "state", "stopped"}: the steps that were stopped.')
                       ] = False,
) -> None:
    """Cancel a run.

    Its pending steps never start, its running steps' processes are stopped, and it ends
    cancelled (in PostgreSQL and benchmarks.json). Exit 1 when it had already ended: it is
    left as it ended."""
    from orchestrator.connect import connect
    from orchestrator.launch import cancel_run

    conn = connect(workers=False)
    done = cancel_run(conn, run_id, "cancelled by `skillq cancel`")
    if as_json:
        print(json.dumps({"run_id": done.run_id, "state": done.state,
                          "stopped": list(done.stopped)}))
    if not done.ended_now:
        raise RunRefused(f"run {run_id} had already ended ({done.state}); nothing to cancel")
    if not as_json:
        stopped = f"; {len(done.stopped)} running step(s) stopped" if done.stopped else ""
        err.print(f"run {run_id} cancelled{stopped}", markup=False)


def wait(run_id: RunIdArg, as_json: JsonOption = False) -> None:
    """Follow a run until it ends.

    As `skillq run` follows one (a `--detach`ed run, say): the same progress, --json and
    exit codes (0 succeeded, 1 failed or cancelled). Ctrl-C stops waiting; the run goes
    on."""
    from orchestrator.cli.run_client import wait_through_api

    if wait_through_api(run_id, as_json):  # a running stack's local API (run_cmds.run)
        return
    from orchestrator.cli.direct_run import DirectRun
    from orchestrator.connect import connect
    from orchestrator.launch import run_progress

    conn = connect()
    run_progress(conn, run_id, counts=False)  # RunNotFound before any display
    announce(run_id)
    follow(DirectRun(conn, run_id), as_json, cancel_on_interrupt=False)


def retry(
    run_id: RunIdArg,
    as_json: JsonOption = False,
    detach: Annotated[bool, typer.Option(
        "--detach", help="Print the new run's id and return; it goes on (`skillq wait`).")
                      ] = False,
) -> None:
    """Retry a run from its failed steps.

    A new run of a failed or cancelled run (recorded as a retry of it) runs its failed
    and unfinished steps again and reuses the outputs of the steps that succeeded; it is
    followed as `skillq run` follows one (Ctrl-C cancels it)."""
    from orchestrator.cli.direct_run import DirectRun
    from orchestrator.connect import connect
    from orchestrator.launch import start_retry

    conn = connect()
    new_id = start_retry(conn, run_id)
    err.print(f"retrying run {run_id} as run {new_id}", markup=False)
    if detach:
        out.print(new_id, markup=False)
        return
    follow(DirectRun(conn, new_id), as_json, cancel_on_interrupt=True)
