"""`skillq secrets set NAME` (the value from stdin or a hidden prompt, never argv) and
`skillq secrets list` (names, where each comes from and which skills declare it; never
values)."""

from __future__ import annotations

import getpass
import re
import sys
from pathlib import Path
from typing import Annotated

import typer

from orchestrator.cli.common import VaultOption, err, out, vault, vault_path
from shared import secrets
from shared.errors import ConfigError
from shared.manifest import IDENT
from shared.settings import get_settings

UNSET = "not set"

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
def list_secrets(
    vault_opt: VaultOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON array: name, source "
                                          "(null when not set), skills.")] = False,
) -> None:
    """The secret names this machine has and the ones the vault's skills declare in
    `auth`: where each comes from (or `not set`) and which skills use it; never values."""
    from orchestrator.cli.tables import Column, emit

    available = secrets.available_names(_file())
    declared = _declared(vault_opt)
    rows = [{"name": name, "source": _source(available.get(name)),
             "skills": sorted(declared.get(name, ()))}
            for name in sorted({*available, *declared})]
    columns = [Column("name", wrap=False),
               Column("source", show=lambda row: row["source"] or UNSET,
                      style=lambda row: "" if row["source"] else "yellow"),
               Column("skills")]
    emit(rows, columns, as_json=as_json,
         empty=f"no secrets: set one with `skillq secrets set NAME` or "
               f"{secrets.PREFIX}NAME in the environment")
    unset = [row["name"] for row in rows if row["source"] is None]
    if unset and not as_json:
        err.print(f"{len(unset)} declared secret(s) not set on this machine: "
                  f"`skillq secrets set NAME` or {secrets.PREFIX}NAME", style="yellow",
                  markup=False)


def _source(found: str | None) -> str | None:
    return "environment" if found == "env" else found


def _declared(vault_opt: Path | None) -> dict[str, set[str]]:
    """Secret name -> the skills declaring it. The default vault may be absent (this
    machine may only run workers); a vault named with --vault must exist."""
    if vault_opt is None and not vault_path(None).is_dir():
        return {}
    names: dict[str, set[str]] = {}
    for skill in vault(vault_opt).skills.values():
        for name in skill.manifest.auth:
            names.setdefault(name, set()).add(skill.name)
    return names
