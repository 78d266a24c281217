"""`skillq up`, `skillq down`, `skillq status`: the local stack (servers and workers).

Progress goes to stderr (a spinner only on a terminal); results go to stdout.
"""

from __future__ import annotations

import os
from typing import Annotated

import typer
from rich.table import Table

from orchestrator.api.apifile import endpoints_key
from orchestrator.api.process import start_api, stop_api
from orchestrator.cli.common import VaultOption, err, out
from orchestrator.embedded import resolve_endpoints, stop_embedded
from orchestrator.local_stack import (
    WORKER_CLASSES,
    classes_for_vault,
    start_workers,
    stop_workers,
    wait_ready,
)
from orchestrator.stack_status import stack_status
from shared.endpoints import mask_url
from shared.errors import VaultError
from shared.problems import display_path
from shared.settings import get_settings


def register(app: typer.Typer) -> None:
    app.command("up")(up)
    app.command("down")(down)
    app.command("status")(status)


def up(
    timeout: Annotated[float, typer.Option(
        help="Seconds to wait for every worker to answer.")] = 60.0,
    all_classes: Annotated[bool, typer.Option(
        "--all", help="A worker for every queue class, not only those the vault's skills "
        "use.")] = False,
    vault_opt: VaultOption = None,
) -> None:
    """Start the local stack: Redis and PostgreSQL under SKILLQ_HOME (unless their URLs are
    set), a worker per queue class the vault's skills use and the local API. Already
    running parts are reused; a run that needs another class starts its worker.

    --vault: the vault the started workers announce and serve (workers already running
    keep theirs).
    """
    from shared.db.migrate import upgrade  # Alembic: only `up` migrates

    if vault_opt is not None:
        if not vault_opt.is_dir():
            raise VaultError(f"vault {display_path(vault_opt)} is not a folder; pass --vault "
                             "with the folder of skills the workers should serve")
        # the workers' environment is built from the settings (processes.stack_env)
        os.environ["SKILLQ_VAULT"] = str(vault_opt.expanduser().resolve())
    settings = get_settings()
    home = settings.home.expanduser().resolve()
    with err.status("starting Redis and PostgreSQL…") as spinner:
        endpoints = resolve_endpoints(settings, start=True)
        # the tables before the workers, once: a worker cannot announce itself (and
        # `skillq run` routes only to announced ones) until they exist
        spinner.update("applying database migrations…")
        upgrade(endpoints.database_url)
        spinner.update("starting workers…")
        classes = WORKER_CLASSES if all_classes else classes_for_vault(
            settings.vault.expanduser())
        procs = start_workers(home, endpoints, classes)
        wait_ready(endpoints, [p.worker.name for p in procs], timeout, home=home,
                   progress=lambda n, total: spinner.update(
                       f"waiting for workers: {n}/{total} ready…"))
        spinner.update("starting the local API…")
        # `skillq run` submits through it (orchestrator/cli/run_client.py) when this
        # caller's environment names the same servers: the key is of the caller's.
        api = start_api(home, endpoints, endpoints_key(os.environ), timeout_s=timeout)
    from shared.celery_app import result_backend_for  # what the workers were given

    results = result_backend_for(endpoints.broker_url, endpoints.result_backend)
    for label, url in (("broker", endpoints.broker_url), ("results", results),
                       ("database", endpoints.database_url)):
        out.print(f"{label:<9} {mask_url(url)}", markup=False)
    for proc in procs:
        state = "already running" if proc.reused else "started"
        out.print(f"worker {proc.worker.name:<8} pid {proc.pid:<7} queues "
                  f"{','.join(proc.worker.queues)}, concurrency {proc.worker.concurrency} "
                  f"({state})", markup=False)
    out.print(f"api      pid {api.pid:<7} http://127.0.0.1:{api.port}/ "
              f"({'already running' if api.reused else 'started'})", markup=False)
    out.print(f"logs in {home / 'logs'}; stop with `skillq down`", markup=False)


def down(
    timeout: Annotated[float, typer.Option(
        help="Seconds a worker may take to finish its running steps before it is killed."
    )] = 30.0,
) -> None:
    """Stop the local API and workers, then the embedded servers (graceful, then killed)."""
    home = get_settings().home.expanduser().resolve()
    with err.status("stopping the local API…") as spinner:
        api = stop_api(home)  # first: no run is submitted to workers being stopped
        spinner.update("stopping workers…")
        workers = stop_workers(home, timeout_s=timeout)
        spinner.update("stopping Redis and PostgreSQL…")
        servers = stop_embedded(home)
    stopped = ["api"] * api + [f"worker {name}" for name in workers] + servers
    out.print(f"stopped: {', '.join(stopped)}" if stopped else f"nothing was running under {home}",
              markup=False)


def status() -> None:
    """What runs under SKILLQ_HOME: embedded servers, workers and the local API, with pids
    and ports."""
    home = get_settings().home.expanduser().resolve()
    services = stack_status(home)
    if not services:
        out.print(f"nothing started under {home}; `skillq up` starts the stack", markup=False)
        return
    table = Table("name", "state", "pid", "detail", title=f"skillq stack in {home}",
                  title_justify="left")
    for svc in services:
        table.add_row(svc.name, "[green]running[/]" if svc.running else "[red]stopped[/]",
                      str(svc.pid or "-"), svc.detail)
    out.print(table)
