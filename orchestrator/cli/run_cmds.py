"""`skillq run` and `skillq worker`, and following a run to its end (`run`, `wait`,
`retry`: one progress display, one set of exit codes, one JSON shape)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from orchestrator.cli import common
from orchestrator.cli.common import VaultOption, vault
from shared.errors import PipelineFailed
from shared.states import RunState
from shared.worker_pools import WorkerPool

if TYPE_CHECKING:
    from orchestrator.connect import Connection
    from shared.db.models import PipelineRun

INTERRUPTED = 130  # 128 + SIGINT: the shell's code for a command ended by Ctrl-C
JsonOption = Annotated[bool, typer.Option(
    "--json", help='Print one JSON object: {"run_id", "state", "outputs"} on success, '
    '{"run_id", "state", "error", "step", "item"} otherwise.')]


def register(app: typer.Typer) -> None:
    from orchestrator.cli.light_params import LightCommand

    app.command("run", cls=LightCommand)(run)  # no pydantic for the thin path
    app.command("worker")(worker)


def run(
    name: str,
    inputs: Annotated[list[str] | None, typer.Option(
        "--input", "-i", help="NAME=VALUE (repeat; JSON for lists and objects).")] = None,
    inputs_file: Annotated[Path | None, typer.Option(
        "--inputs-file", help="A JSON object of input values.")] = None,
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
    # or vault code at all (about a second of a cold start). Without one, the run is
    # submitted from here, exactly as before.
    if submit_through_api(name, inputs or [], inputs_file, as_json=as_json, detach=detach,
                          vault_opt=vault_opt):
        return
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
    from orchestrator.connect import connect
    from orchestrator.launch import start_run

    conn = connect(vault_workers=False)
    run_id = start_run(conn, loaded, skill, given, source="production", triggered_by="cli",
                       workdir=str(Path.cwd()), waiting=not detach)
    announce(run_id)
    if detach:
        common.out.print(run_id, markup=False)
        return
    follow(conn, run_id, as_json, cancel_on_interrupt=True)


def announce(run_id: str) -> None:
    """The run id, on stderr whatever else is asked for: stdout stays the result's."""
    common.err.print(f"run {run_id}", markup=False)


def follow(conn: Connection, run_id: str, as_json: bool, *,
           cancel_on_interrupt: bool) -> None:
    """Show a run's progress until it ends, then report it (exit 0 succeeded, 1 failed or
    cancelled). Ctrl-C cancels it (``cancel_on_interrupt``), or stops following it.

    The result is shown as soon as it is read; the command returns once the run's
    benchmarks.json files show it too (written by its worker just after)."""
    shown: list[PipelineRun] = []

    def show_end(run: PipelineRun) -> None:
        show(conn, run, as_json)
        shown.append(run)

    try:
        final = _wait(conn, run_id, as_json, show_end)
    except KeyboardInterrupt:
        if shown:  # ended and shown: only its files were still being waited for
            report(conn, shown[0], as_json, shown=True)
            return
        if not cancel_on_interrupt:
            common.err.print(f"stopped following run {run_id}; it goes on (`skillq wait {run_id}`, "
                      f"`skillq cancel {run_id}`)", markup=False)
            raise typer.Exit(INTERRUPTED) from None
        final = _cancel_interrupted(conn, run_id)
        if final.state == RunState.CANCELLED:
            if as_json:
                _print_json(conn, final)
            raise typer.Exit(INTERRUPTED) from None
    report(conn, final, as_json, shown=bool(shown))


def _cancel_interrupted(conn: Connection, run_id: str) -> PipelineRun:
    from orchestrator.launch import cancel_run, run_progress

    def at_once(signum: int, frame: Any) -> None:
        print(f"exiting; run {run_id} may still be running (`skillq cancel {run_id}`)",
              file=sys.stderr, flush=True)
        os._exit(INTERRUPTED)

    signal.signal(signal.SIGINT, at_once)
    common.err.print(f"cancelling run {run_id} (Ctrl-C again to exit at once)", markup=False)
    done = cancel_run(conn, run_id, "cancelled: Ctrl-C on the `skillq` command following it")
    final, _ = run_progress(conn, run_id, counts=False)
    if done.ended_now:
        stopped = f"; {len(done.stopped)} running step(s) stopped" if done.stopped else ""
        common.err.print(f"run {run_id} cancelled{stopped}", markup=False)
    return final


def _wait(conn: Connection, run_id: str, quiet: bool,
          on_end: Callable[[PipelineRun], None]) -> PipelineRun:
    from orchestrator.cli.run_bar import progress_bar
    from orchestrator.launch import Progress as RunProgress
    from orchestrator.launch import wait_run

    with contextlib.ExitStack() as bar:
        show = bar.enter_context(progress_bar(run_id, quiet))

        def shown(p: RunProgress) -> None:
            show(p.total, p.done, p.counts)

        def ended(run: PipelineRun) -> None:
            bar.close()  # the bar's last frame goes out before the result does
            on_end(run)

        return wait_run(conn, run_id, on_progress=shown, on_end=ended)


def result_json(conn: Connection, run: PipelineRun) -> dict[str, Any]:
    """What `--json` prints for an ended run."""
    if run.state != RunState.SUCCEEDED:
        return {"run_id": run.id, "state": run.state, "error": run.error,
                "step": run.failed_step, "item": run.failed_item}
    from shared.db.session import transaction
    from shared.store import unpack

    with transaction(conn.endpoints.database_url) as session:
        outputs: Any = unpack(session, run.outputs)
    return {"run_id": run.id, "state": run.state, "outputs": outputs}


def _print_json(conn: Connection, run: PipelineRun) -> None:
    print(json.dumps(result_json(conn, run), ensure_ascii=False))
    sys.stdout.flush()


def failure_message(run: PipelineRun) -> str:
    """What `skillq run` says (as ``error: ...``, exit 1) of a run that did not succeed."""
    what = "was cancelled" if run.state == RunState.CANCELLED else "aborted"
    return f"run {run.id} of {run.skill} {what}: {run.error}"


def success_line(run: PipelineRun) -> str:
    return f"✓ {run.skill} succeeded (run {run.id})"


def report(conn: Connection, run: PipelineRun, as_json: bool, *, shown: bool = False
           ) -> None:
    """Show an ended run (unless ``shown`` already) and exit as it ended."""
    if not shown:
        show(conn, run, as_json)
    if run.state != RunState.SUCCEEDED:
        raise PipelineFailed(failure_message(run))


def show(conn: Connection, run: PipelineRun, as_json: bool) -> None:
    """What `skillq run` prints of an ended run (a failure's line comes with its exit)."""
    if as_json:
        _print_json(conn, run)
    elif run.state == RunState.SUCCEEDED:
        common.err.print(success_line(run), style="green")
        print(json.dumps(result_json(conn, run)["outputs"], indent=2, ensure_ascii=False))
        sys.stdout.flush()


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
