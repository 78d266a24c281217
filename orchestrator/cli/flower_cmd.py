"""`skillq flower`: Flower on skillq's broker, behind basic auth (docs/flower.md).

Credentials come from SKILLQ_FLOWER_AUTH and reach Flower through its own environment
variable, never the command line (which `ps` shows to every user). Without credentials
Flower starts only on a loopback address; its HTTP API then refuses every request
(Flower's rule), and FLOWER_UNAUTHENTICATED_API is removed so it cannot be opened.
"""

from __future__ import annotations

import os
from typing import Annotated

import typer

from orchestrator.cli.common import err
from shared.errors import ConfigError
from shared.settings import get_settings

LOOPBACK = ("127.0.0.1", "::1", "localhost")


def register(app: typer.Typer) -> None:
    app.command("flower")(flower)


def check_auth(auth: str | None, address: str) -> str | None:
    """The credentials to hand to Flower; ConfigError when they are unusable or missing
    on a non-loopback address."""
    if not auth:
        if address not in LOOPBACK:
            raise ConfigError(f"refusing to serve Flower on {address} without "
                              "authentication: set SKILLQ_FLOWER_AUTH=user:password, or "
                              "bind to 127.0.0.1 (--address 127.0.0.1)")
        return None
    for pair in auth.split(","):
        user, sep, password = pair.partition(":")
        if not sep or not user.strip() or not password:
            raise ConfigError("SKILLQ_FLOWER_AUTH: write user:password (several separated "
                              "by commas), e.g. SKILLQ_FLOWER_AUTH=ops:long-random-password")
    return auth


def flower(
    address: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 5555,
) -> None:
    """Flower: workers, queues and tasks, with basic auth from SKILLQ_FLOWER_AUTH."""
    secret = get_settings().flower_auth
    auth = check_auth(secret.get_secret_value() if secret else None, address)
    from orchestrator.connect import connect

    conn = connect(workers=False)
    os.environ.pop("FLOWER_UNAUTHENTICATED_API", None)
    if auth is None:
        os.environ.pop("FLOWER_BASIC_AUTH", None)
        err.print(f"Flower on {address}:{port} without authentication (loopback only; "
                  "its API refuses requests): set SKILLQ_FLOWER_AUTH=user:password to "
                  "open it", markup=False)
    else:
        os.environ["FLOWER_BASIC_AUTH"] = auth
    conn.app.start(["flower", f"--address={address}", f"--port={port}"])
