"""`skillq dashboard`: the web dashboard (skills, runs, trends, daemons, schedules, notes)."""

from __future__ import annotations

from typing import Annotated

import typer

from orchestrator.cli.common import VaultOption, err, vault_path
from shared.errors import DashboardError


def register(app: typer.Typer) -> None:
    app.command("dashboard")(dashboard)


def dashboard(
    host: Annotated[str, typer.Option(help="Address to listen on. Anything but loopback "
                                      "needs SKILLQ_DASHBOARD_AUTH=USER:PASSWORD.")
                    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port to listen on.")] = 8765,
    vault_opt: VaultOption = None,
) -> None:
    """Serve the dashboard until interrupted (Ctrl-C)."""
    from orchestrator.dashboard.config import DashboardConfig, check_bind, credentials_from_env
    from orchestrator.dashboard.hosts import parse_hosts
    from shared.settings import get_settings

    credentials = credentials_from_env()
    check_bind(host, credentials)  # before anything starts or listens
    parse_hosts(get_settings().dashboard_hosts)  # a bad entry: refused as early
    try:
        import uvicorn

        from orchestrator.dashboard.app import create_app
    except ImportError as exc:
        raise DashboardError(f"the dashboard needs its extra packages ({exc.name} is "
                             "missing): pip install 'skillq[dashboard]'") from None
    from orchestrator.connect import connect

    conn = connect(workers=False)
    root = vault_path(vault_opt).resolve()
    config = DashboardConfig(host=host, port=port, vault=root,
                             database_url=conn.endpoints.database_url, credentials=credentials,
                             discovery_ttl_s=conn.settings.discovery_ttl_s,
                             daemon_offline_after_s=conn.settings.daemon_offline_after_s,
                             hosts=conn.settings.dashboard_hosts,
                             input_max_bytes=conn.settings.input_max_bytes)
    shown = f"[{host}]" if ":" in host else host
    err.print(f"skillq dashboard on http://{shown}:{port}/ (vault {root}"
              f"{'; basic auth on' if credentials else ''}); Ctrl-C stops it", markup=False)
    # timeout_graceful_shutdown: an open Ask stream (server-sent events) would otherwise
    # hold Ctrl-C until its run ends
    uvicorn.run(create_app(config, conn), host=host, port=port, log_level="warning",
                timeout_graceful_shutdown=2,
                access_log=False)
