"""`skillq secrets set NAME` (the value from stdin or a hidden prompt, never argv) and
`skillq secrets list` (names and where each comes from, never values)."""

from __future__ import annotations

import getpass
import re
import sys
from pathlib import Path
from typing import Annotated

import typer

from orchestrator.cli.common import out
from shared import secrets
from shared.errors import ConfigError
from shared.manifest import IDENT
from shared.settings import get_settings

secrets_app = typer.Typer(help="The secrets skills declare in `auth` (values never shown).",
                          no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(secrets_app, name="secrets")


def _file() -> Path:
    settings = get_settings()
    return settings.secrets_file or secrets.default_file(settings.home)


def _read_value(name: str) -> str:
    if sys.stdin.isatty():
        value = getpass.getpass(f"value for {name} (not echoed): ")
    else:
        value = sys.stdin.read()
        if value.endswith("\n"):  # `echo x | skillq secrets set` adds one newline
            value = value[:-2] if value.endswith("\r\n") else value[:-1]
    if not value:
        raise ConfigError(f"no value given for {name}: pipe it on stdin or type it at the "
                          "prompt")
    return value


@secrets_app.command("set")
def set_secret(name: Annotated[str, typer.Argument(help="The name a skill's `auth` uses.")]
               ) -> None:
    """Store a secret in the owner-only secrets file; the value is read from stdin, or
    from a hidden prompt on a terminal."""
    if not re.fullmatch(IDENT, name):
        raise ConfigError(f"secret name {name!r} is not valid: letters, digits and _ "
                          "(as in a skill's `auth`), not starting with a digit")
    path = _file()
    secrets.store(path, name, _read_value(name))
    out.print(f"✓ stored {name} in {path} (mode 0600)", markup=False)


@secrets_app.command("list")
def list_secrets() -> None:
    """The secret names this machine has, and where each comes from; never the values."""
    names = secrets.available_names(_file())
    if not names:
        out.print(f"no secrets: set one with `skillq secrets set NAME` or "
                  f"{secrets.PREFIX}NAME in the environment", markup=False)
        return
    for name, source in names.items():
        out.print(f"{name}\t{'environment' if source == 'env' else source}", markup=False)
