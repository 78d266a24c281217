"""What every command shares: the vault option, consoles, and turning errors into exits.

Every command module imports this one, so it stays light: the vault code and the
settings are imported when a command first asks for a vault, and rich when a command
first asks for a console (``out``, ``err``), so the thin `skillq run` has its run
submitted before it pays for rich (orchestrator/cli/run_client.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from rich.console import Console

    from shared.vault import Vault


def __getattr__(name: str) -> Console:
    """``out`` (stdout) and ``err`` (stderr), made on first use, then module attributes."""
    if name not in ("out", "err"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from rich.console import Console

    console = Console(stderr=name == "err", highlight=False, soft_wrap=True)
    globals()[name] = console
    return console


VaultOption = Annotated[
    Path | None,
    typer.Option("--vault", help="Vault folder (default: $SKILLQ_VAULT, else ./vault).",
                 show_default=False),
]


def vault_path(option: Path | None) -> Path:
    from shared.settings import get_settings

    return option if option is not None else get_settings().vault


def vault(option: Path | None) -> Vault:
    from shared.settings import get_settings
    from shared.vault import open_vault

    return open_vault(vault_path(option), ttl_s=get_settings().discovery_ttl_s)


def one_line(text: str) -> str:
    return " ".join(text.split())


def announce(run_id: str) -> None:
    """The run id, on stderr whatever else is asked for: stdout stays the result's."""
    __getattr__("err").print(f"run {run_id}", markup=False)
