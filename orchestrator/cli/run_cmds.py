"""`skillq run` and `skillq worker`. A run is followed to its end by cli/follow.py, the
same way through the local API (run_client.py) or directly (direct_run.py)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from orchestrator.cli import common
from orchestrator.cli.common import VaultOption, announce, vault
from orchestrator.cli.follow import follow
from shared.worker_pools import WorkerPool

if TYPE_CHECKING:
    pass

JsonOption = Annotated[bool, typer.Option(
    "--json", help='Print one JSON object: {"run_id", "state", "outputs"} on success, '
    '{"run_id", "state", "error", "step", "item"} otherwise.')]

InputsOption = Annotated[list[str] | None, typer.Option(
    "--input", "-i", help="NAME=VALUE (repeat; JSON for lists and objects).")]
InputsFileOption = Annotated[Path | None, typer.Option(
    "--inputs-file", help="A JSON object of input values.")]


def register(app: typer.Typer) -> None:
    from orchestrator.cli.light_params import LightCommand

    app.command("run", cls=LightCommand)(run)  # no pydantic for the thin path
    app.command("try")(try_)
    app.command("worker")(worker)


def run(
    name: str,
    inputs: InputsOption = None,
    inputs_file: InputsFileOption = None,
    as_json: JsonOption = False,
    detach: Annotated[bool, typer.Option(
        "--detach", help="Print the run id and return; the run goes on (`skillq wait`).")
                      ] = False,
    vault_opt: VaultOption = None,
) -> None:
    """Run a skill through the queues; exit 0 on success, 1 if it aborted, 2 on bad input.

    Ctrl-C cancels the run (a second Ctrl-C exits at once); --detach leaves it running."""
    from orchestrator.cli.run_client import submit_through_api

    # A running stack's local API first: this process then imports no Celery, SQLAlchemy
    # or vault code at all (most of a cold start). Without one, the run is
    # submitted from here, exactly as before.
    if submit_through_api(name, inputs or [], inputs_file, as_json=as_json, detach=detach,
                          vault_opt=vault_opt):
        return
    _run_here(name, inputs, inputs_file, vault_opt, source="production", triggered_by="cli",
              as_json=as_json, detach=detach)


def try_(
    name: str,
    request: Annotated[str | None, typer.Argument(
        help="A request in your own words: an agent with only this skill turns it into "
        "calls of it, asks when something is missing, and takes further requests from "
        "stdin until it ends.", show_default=False)] = None,
    inputs: InputsOption = None,
    inputs_file: InputsFileOption = None,
    as_json: JsonOption = False,
    vault_opt: VaultOption = None,
) -> None:
    """Try a skill as its folder stands, before publishing it (seed 000's test window).

    With --input: one run of it. With a REQUEST: a session with an agent that has only
    this skill (its calls of it are the runs). Either way the runs are recorded with
    source test_window and land in the skill's benchmarks.json like any run; a draft of
    a published skill runs as edited, and the published version and its production
    stats are left alone. Exit codes as `skillq run`."""
    from shared.skillfiles import RunSource

    if request is not None:
        if inputs or inputs_file or as_json:
            raise typer.BadParameter("a REQUEST starts a session; give --input, "
                                     "--inputs-file or --json without one")
        from orchestrator.cli.try_session_cmd import session

        session(vault(vault_opt), name, request)
        return

    _run_here(name, inputs, inputs_file, vault_opt, source=RunSource.TEST_WINDOW.value,
              triggered_by="try", as_json=as_json, detach=False)


def _run_here(name: str, inputs: list[str] | None, inputs_file: Path | None,
              vault_opt: Path | None, *, source: str, triggered_by: str, as_json: bool,
              detach: bool) -> None:
    """Start the run from this process (no local API) and follow it, or print its id."""
    from orchestrator.local_stack import classes_for_skill, start_early
    from orchestrator.submit import checked
    from shared.inputs import parse_cli_inputs

    loaded = vault(vault_opt)
    skill = loaded.get(name)
    checked(loaded, skill)
    given = parse_cli_inputs(skill.manifest, inputs or [], inputs_file)  # exit 2 when bad
    # A stopped stack's servers and this run's workers first: the workers' start-up then
    # overlaps this process's imports of Celery and SQLAlchemy, below.
    start_early(classes_for_skill(loaded, skill))
    from orchestrator.cli.direct_run import DirectRun
    from orchestrator.connect import connect
    from orchestrator.launch import start_run

    conn = connect(vault_workers=False)
    run_id = start_run(conn, loaded, skill, given, source=source, triggered_by=triggered_by,
                       workdir=str(Path.cwd()), waiting=not detach)
    announce(run_id)
    if detach:
        common.out.print(run_id, markup=False)
        return
    follow(DirectRun(conn, run_id), as_json, cancel_on_interrupt=True)


def worker(
    queues: Annotated[str, typer.Option(help="Comma-separated queues, e.g. default,control.")
                      ] = "default,control",
    concurrency: Annotated[int, typer.Option(help="Processes (1 for dom0 and cmd0).")] = 2,
    pool: Annotated[WorkerPool, typer.Option(
        help="prefork: steps in pool processes; threads: in the worker's own process "
        "(one process instead of two where concurrency is 1).")] = WorkerPool.PREFORK,
    name: Annotated[str | None, typer.Option(help="Worker name.")] = None,
    daemon: Annotated[str | None, typer.Option(
        help="This machine's daemon name (default: SKILLQ_DAEMON, else the host name).")
                      ] = None,
    role: Annotated[str | None, typer.Option(
        help="agent or daily-driver: routing prefers agent daemons.")] = None,
    vault_opt: VaultOption = None,
) -> None:
    """Serve queues in the foreground with the configured broker and database."""
    from orchestrator.connect import connect

    if vault_opt is not None:  # the vault whose skills this worker serves and announces
        os.environ["SKILLQ_VAULT"] = str(vault_opt.expanduser().resolve())
    conn = connect(workers=False)
    os.environ.update(conn.endpoints.env())
    # The data plane is its own program: the control plane hands this process over to it
    # rather than importing it (one import direction, pyproject's import-linter contract).
    argv = [sys.executable, "-m", "workers.main", "--queues", queues,
            "--concurrency", str(concurrency), "--pool", pool.value,
            *(["--name", name] if name else []),
            *(["--daemon", daemon] if daemon else []), *(["--role", role] if role else [])]
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, argv)  # noqa: S606 - argv, no shell
