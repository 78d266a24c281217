"""The `skillq` command line: one Typer app, commands registered from small modules."""

from __future__ import annotations

import sys

import typer

from orchestrator.cli import export_cmds, graph_cmd, new_cmd, run_cmds, stack_cmds, vault_cmds
from orchestrator.cli.common import err
from shared.errors import SkillqError

app = typer.Typer(
    name="skillq",
    help="Modular, tested, distributed skills.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
for module in (vault_cmds, graph_cmd, new_cmd, export_cmds, run_cmds, stack_cmds):
    module.register(app)


def main() -> None:
    """Console entry point: a SkillqError is a message and an exit code, never a traceback.

    Click handles usage errors itself (exit 2) in standalone mode.
    """
    try:
        app()
    except SkillqError as exc:
        err.print(f"error: {exc}", markup=False)
        sys.exit(exc.exit_code)
