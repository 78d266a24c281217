"""`skillq api`: the local API in the foreground (`skillq up` starts it detached)."""

from __future__ import annotations

import dataclasses
import os
from typing import Annotated

import typer

from orchestrator.cli.common import err
from shared.errors import ConfigError


def register(app: typer.Typer) -> None:
    app.command("api")(api)


def api(
    port: Annotated[int | None, typer.Option(
        min=0, max=65535, help="Port on 127.0.0.1 (default SKILLQ_API_PORT; 0 = a free one).")
                    ] = None,
    endpoints_key: Annotated[str | None, typer.Option(
        "--endpoints-key", hidden=True,
        help="The endpoint digest clients must match (`skillq up` passes its caller's).")
                             ] = None,
    local_workers: Annotated[bool, typer.Option(
        "--local-workers", hidden=True,
        help="Start a worker class of SKILLQ_HOME's local stack on a run's first need "
        "(`skillq up` passes it).")] = False,
) -> None:
    """Serve the local API that `skillq run` submits through, until interrupted.

    It listens on 127.0.0.1 only and records its port and a fresh token in
    SKILLQ_HOME/api.json (0600); `skillq run` and `skillq wait` use it when it answers
    and fall back to doing the work themselves when it does not."""
    from orchestrator.api.apifile import endpoints_key as key_of
    from orchestrator.api.server import HOST, bind, serve
    from orchestrator.connect import connect
    from shared.settings import get_settings

    settings = get_settings()
    wanted = settings.api_port if port is None else port
    try:
        sock = bind(wanted)
    except OSError as exc:
        raise ConfigError(f"the local API cannot listen on {HOST}:{wanted} "
                          f"({exc.strerror or exc}); set SKILLQ_API_PORT to a free port, "
                          "or 0 for any") from None
    key = endpoints_key or key_of(os.environ)  # before connect() fills in anything
    conn = connect(workers=False)
    home = settings.home.expanduser().resolve()
    if local_workers:
        conn = dataclasses.replace(conn, local_workers=home)
    err.print(f"skillq local API on http://{HOST}:{sock.getsockname()[1]}/ (token in "
              f"{home / 'api.json'}); Ctrl-C stops it", markup=False)
    serve(conn, sock, home, key)
