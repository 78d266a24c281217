"""The `skillq` command line: one Typer app, commands registered from small modules."""

from __future__ import annotations

import sys

import typer

from orchestrator.cli import (
    archive_cmds,
    daemon_cmds,
    dashboard_cmds,
    export_cmds,
    flower_cmd,
    graph_cmd,
    history_cmds,
    library_cmds,
    new_cmd,
    notes_cmds,
    publish_cmds,
    run_cmds,
    schedule_cmds,
    secrets_cmds,
    stack_cmds,
    test_cmds,
    vault_cmds,
)
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
# In the order `skillq --help` lists them: the vault, running, the library, lifecycle,
# machines and operations.
for module in (vault_cmds, graph_cmd, new_cmd, export_cmds, run_cmds, history_cmds, stack_cmds,
               library_cmds, archive_cmds, test_cmds, notes_cmds, publish_cmds,
               daemon_cmds, schedule_cmds, flower_cmd, dashboard_cmds, secrets_cmds):
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
    except Exception as exc:
        from shared.db.outage import first_line, is_outage
        from shared.errors import DatabaseUnreachable

        if not is_outage(exc):
            raise
        # Before anything was recorded (a run that waits through an outage says so
        # itself): where the database is, and what to look at.
        err.print(f"error: the database is unreachable ({first_line(exc)}); check that "
                  "PostgreSQL runs (`skillq status`, or SKILLQ_DATABASE_URL)", markup=False)
        sys.exit(DatabaseUnreachable.exit_code)
