"""`skillq run` and `skillq worker`."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from orchestrator.cli.common import VaultOption, err, out, vault
from orchestrator.connect import Connection, connect
from orchestrator.launch import Progress as RunProgress
from orchestrator.launch import start_run, wait_run
from orchestrator.submit import checked
from shared.db.models import PipelineRun
from shared.db.session import transaction
from shared.errors import PipelineFailed
from shared.inputs import parse_cli_inputs
from shared.states import RunState
from shared.store import unpack


def register(app: typer.Typer) -> None:
    app.command("run")(run)
    app.command("worker")(worker)


def run(
    name: str,
    inputs: Annotated[list[str] | None, typer.Option(
        "--input", "-i", help="NAME=VALUE (repeat; JSON for lists and objects).")] = None,
    inputs_file: Annotated[Path | None, typer.Option(
        "--inputs-file", help="A JSON object of input values.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print only the outputs, as JSON.")
                       ] = False,
    detach: Annotated[bool, typer.Option("--detach", help="Print the run id and return.")
                      ] = False,
    vault_opt: VaultOption = None,
) -> None:
    """Run a skill through the queues; exit 0 on success, 1 if it aborted, 2 on bad input."""
    loaded = vault(vault_opt)
    skill = loaded.get(name)
    checked(loaded, skill)
    given = parse_cli_inputs(skill.manifest, inputs or [], inputs_file)  # exit 2 when bad
    conn = connect()
    run_id = start_run(conn, loaded, skill, given, source="production", triggered_by="cli",
                       workdir=str(Path.cwd()))
    if detach:
        out.print(run_id, markup=False)
        return
    final = _wait(conn, run_id, as_json)
    _report(conn, final, as_json)


def _wait(conn: Connection, run_id: str, quiet: bool) -> PipelineRun:
    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
               TextColumn("{task.completed}/{task.total}"), TimeElapsedColumn())
    with Progress(*columns, console=err, transient=False, disable=quiet) as bar:
        task = bar.add_task(f"{run_id}", total=None)

        def show(p: RunProgress) -> None:
            detail = ", ".join(f"{n} {s}" for s, n in sorted(p.counts.items())) or "starting"
            bar.update(task, total=p.total or None, completed=p.done,
                       description=f"{run_id}: {detail}")

        return wait_run(conn, run_id, on_progress=show)


def _report(conn: Connection, run: PipelineRun, as_json: bool) -> None:
    if run.state != RunState.SUCCEEDED:
        raise PipelineFailed(f"run {run.id} of {run.skill} aborted: {run.error}")
    with transaction(conn.endpoints.database_url) as session:
        outputs: Any = unpack(session, run.outputs)
    if not as_json:
        err.print(f"✓ {run.skill} succeeded (run {run.id})", style="green")
    print(json.dumps(outputs, indent=None if as_json else 2, ensure_ascii=False))
    sys.stdout.flush()


def worker(
    queues: Annotated[str, typer.Option(help="Comma-separated queues, e.g. default,control.")
                      ] = "default,control",
    concurrency: Annotated[int, typer.Option(help="Processes (1 for dom0 and cmd0).")] = 2,
    name: Annotated[str | None, typer.Option(help="Worker name.")] = None,
    daemon: Annotated[str | None, typer.Option(
        help="This machine's daemon name (default: SKILLQ_DAEMON, else the host name).")
                      ] = None,
    role: Annotated[str | None, typer.Option(
        help="agent or daily-driver: routing prefers agent daemons.")] = None,
) -> None:
    """Serve queues in the foreground with the configured broker and database."""
    conn = connect(workers=False)
    os.environ.update(conn.endpoints.env())
    # The data plane is its own program: the control plane hands this process over to it
    # rather than importing it (one import direction, pyproject's import-linter contract).
    argv = [sys.executable, "-m", "workers.main", "--queues", queues,
            "--concurrency", str(concurrency), *(["--name", name] if name else []),
            *(["--daemon", daemon] if daemon else []), *(["--role", role] if role else [])]
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, argv)  # noqa: S606 - argv, no shell
