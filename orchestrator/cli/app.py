"""The `skillq` command line: a lazy command group over small command modules.

`skillq --help`, `validate`, `list`, `show` and `catalog` must start fast, and most command
modules pull in SQLAlchemy, Celery, Alembic or the archive code. So the group knows every
command's name, module and one-line help from `COMMANDS` below and imports a command's
module only when that command runs (or its own help or completion is asked for).
tests/unit/test_cli_app.py keeps the table true to what the modules register.
"""

from __future__ import annotations

import gc
import importlib
import sys
from collections.abc import Iterator, MutableMapping
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

try:  # typer >= 0.2x vendors its own click; older ones use click itself
    from typer import _click as click
except ImportError:  # pragma: no cover - depends on the installed typer
    import click  # type: ignore[no-redef]

from shared.errors import SkillqError

# (command, module under orchestrator/cli/, the first sentence of its help), in the order
# `skillq --help` lists them: the vault, running, the library, lifecycle, machines and
# operations. A module's `register(app)` adds its commands; sub-apps (`daemons`,
# `schedule`, `secrets`, `artifact`) are one entry each.
COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("validate", "vault_cmds",
     "Check skills and report every problem as `<file>: <field>: <what to fix>`."),
    ("list", "vault_cmds",
     "One row per skill, pinned ones first: name, label, kind, approach, version, pin, "
     "state (enabled or disabled) and description."),
    ("show", "vault_cmds",
     "A skill's manifest, inputs, outputs, steps, sub-skills, test cases and aggregates."),
    ("catalog", "vault_cmds",
     "The progressive-disclosure listing: what a model sees before loading a skill."),
    ("graph", "graph_cmd", "Draw what a skill is made of."),
    ("new", "new_cmd",
     "Create NAME with SKILL.md, plan.md, benchmarks.json, sub-skills.json and a script."),
    ("export", "export_cmds",
     "Write skills into OUT in another on-disk form, or the vault and its history into an "
     "archive; the vault itself is left as it is."),
    ("sync", "export_cmds",
     "Regenerate an orchestrator's sub-skills.json from its steps (roles are kept)."),
    ("run", "run_cmds",
     "Run a skill through the queues; exit 0 on success, 1 if it aborted, 2 on bad input."),
    ("try", "run_cmds",
     "Try a skill as its folder stands, before publishing it (seed 000's test window)."),
    ("ask", "ask_cmd",
     "One agent turn over the library: its enabled skills, the skill, execute_skill and "
     "skill_improvement_note tools; the answer streams to stdout."),
    ("build", "build_cmds",
     "Plan, approve, build in parallel and test a pipeline of skills from a task in your "
     "words; its drafts land in the vault, for you to try and publish."),
    ("plans", "build_cmds", "Builds, newest first: their stage, round of revision and task."),
    ("plan", "build_cmds",
     "A build's plan: show it, send it back with feedback, write its drafts into the "
     "vault."),
    ("inbox", "wait_cmds",
     "Every question and approval waiting for a person, across runs, oldest first: the "
     "run, the step, what is asked, since when, and who can answer."),
    ("answer", "wait_cmds",
     "Answer a question an agent step of the run asked (ask_question); the step goes on "
     "with it."),
    ("approve", "wait_cmds",
     "Approve the run's approval step; its inputs (yours, else their defaults) are the "
     "step's outputs, which later steps read."),
    ("reject", "wait_cmds",
     "Reject the run's approval step: the run ends rejected (or follows the step's "
     "on_failure)."),
    ("cancel", "run_ops_cmds", "Cancel a run."),
    ("wait", "run_ops_cmds", "Follow a run until it ends."),
    ("retry", "run_ops_cmds", "Retry a run from its failed steps."),
    ("worker", "run_cmds",
     "Serve queues in the foreground with the configured broker and database."),
    ("runs", "history_cmds",
     "Pipeline run history, newest first: state, source, what triggered each run, when, "
     "how long, and why it failed."),
    ("run-show", "history_cmds",
     "One run as a tree of steps: status, outputs, worker, attempts, duration, error, and "
     "an agent step's tokens, cost and model turns."),
    ("artifact", "artifact_cmds",
     "Files and large values in the shared store: `skillq artifact get REF [-o PATH]`."),
    ("up", "stack_cmds",
     "Start the local stack: Redis and PostgreSQL under SKILLQ_HOME (unless their URLs are "
     "set), a worker per queue class the vault's skills use and the local API."),
    ("down", "stack_cmds",
     "Stop the local API and workers, then the embedded servers (graceful, then killed)."),
    ("status", "stack_cmds",
     "What runs under SKILLQ_HOME: embedded servers, workers and the local API, with pids "
     "and ports."),
    ("enable", "library_cmds", "Let a disabled skill run again."),
    ("disable", "library_cmds",
     "Stop a skill from running (`skillq run`, and any orchestrator that calls it, are "
     "refused before anything is recorded)."),
    ("delete", "library_cmds",
     "Soft-delete a skill: its folder moves to <vault>/.deleted/, its run history stays, "
     "and its name is free for a new skill."),
    ("label", "library_cmds",
     "Set the name people see for a skill (SKILL.md is not changed)."),
    ("pin", "library_cmds",
     "Pin a skill: pinned skills come first in `skillq list` and `catalog` (at most 10)."),
    ("unpin", "library_cmds", "Unpin a skill (the other pins close up)."),
    ("defaults", "library_cmds",
     "Install or update skillq's built-in skills in the vault; skills you edited or "
     "deleted are left alone."),
    ("import", "archive_cmds",
     "Restore a vault archive: its skill folders into the vault and its history into the "
     "database."),
    ("test", "test_cmds",
     "Run a skill's test cases (benchmarks.json) through the queues, all at once."),
    ("eval", "eval_cmds",
     "Run a skill's test cases N times each through the queues (source eval): pass rate, "
     "pass@k, pass^k, and duration, tokens and cost as mean ± stddev, beside a baseline."),
    ("notes", "notes_cmds",
     "Improvement notes left by production failures: step, error, inputs (secrets "
     "hidden), diagnosis and suggested fix."),
    ("publish", "publish_cmds",
     "Validate a skill, run its test cases, give it the next version, store that version "
     "(files, hashes, who/where/when) and make its folder read-only."),
    ("versions", "publish_cmds",
     "Published versions of a skill with their provenance and how each has run."),
    ("rollback", "publish_cmds",
     "Make version N's files the newest version again (published as a new number with "
     "N's files: version numbers are never reused)."),
    ("bench", "publish_cmds",
     "Duration (median, p90), cost and success rate of each version, from the run "
     "records; with --compare, two versions and the change between them."),
    ("beat", "schedule_cmds",
     "Fire schedules; only one beat is active at a time (others wait for the lock)."),
    ("flower", "flower_cmd",
     "Flower: workers, queues and tasks, with basic auth from SKILLQ_FLOWER_AUTH."),
    ("dashboard", "dashboard_cmds", "Serve the dashboard until interrupted (Ctrl-C)."),
    ("api", "api_cmd", "Serve the local API that `skillq run` submits through, until "
     "interrupted."),
    ("mcp", "mcp_cmd",
     "Serve the vault's skills to MCP clients: list, load and run skills, file notes."),
    ("daemons", "daemon_cmds",
     "Daemons: online or offline, role, capabilities, software, queues, model providers, "
     "key, last heartbeat; and their keys."),
    ("schedule", "schedule_cmds", "Run skills on cron lines (fired by `skillq beat`)."),
    ("secrets", "secrets_cmds",
     "The secrets skills declare in `auth` (values never shown)."),
)
MODULE_OF = {name: module for name, module, _ in COMMANDS}
HELP_OF = {name: text for name, _, text in COMMANDS}


def commands_of(module_name: str) -> dict[str, click.Command]:
    """Import one command module and the click commands its `register` adds, by name."""
    module = importlib.import_module(f"orchestrator.cli.{module_name}")
    holder = typer.Typer(rich_markup_mode=None)
    module.register(holder)
    return dict(typer.main.get_group(holder).commands)


class LazyCommands(MutableMapping[str, click.Command]):
    """TyperGroup's `commands` mapping: names from the table, modules imported on use."""

    def __init__(self) -> None:
        self._loaded: dict[str, click.Command] = {}
        self._modules: set[str] = set()

    def __getitem__(self, name: str) -> click.Command:
        if name not in self._loaded:
            module = MODULE_OF[name]  # KeyError: click's "No such command"
            if module not in self._modules:
                self._modules.add(module)
                self._loaded.update(commands_of(module))
        return self._loaded[name]

    def __setitem__(self, name: str, command: click.Command) -> None:
        self._loaded[name] = command

    def __delitem__(self, name: str) -> None:
        del self._loaded[name]

    def __iter__(self) -> Iterator[str]:
        yield from MODULE_OF
        yield from (name for name in self._loaded if name not in MODULE_OF)

    def __len__(self) -> int:
        return len(MODULE_OF) + sum(1 for name in self._loaded if name not in MODULE_OF)


class LazyGroup(TyperGroup):
    """Lists and completes commands from the table; resolving one imports its module."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.commands = LazyCommands()

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        from orchestrator.cli.light_params import lighten

        # --version, --help and the completion flags (typer adds those after __init__)
        # read without pydantic: the thin `skillq run` never imports it (light_params.py)
        params = super().get_params(ctx)
        lighten(params)
        return params

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # What TyperGroup.format_commands prints, without getting (importing) each command.
        limit = formatter.width - 6 - max(len(name) for name in HELP_OF)
        rows = [(name, click.utils.make_default_short_help(text, limit))
                for name, text in HELP_OF.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def shell_complete(self, ctx: click.Context, incomplete: str
                       ) -> list[click.shell_completion.CompletionItem]:
        # TyperGroup's would get every command to read its help: all modules imported.
        items = [click.shell_completion.CompletionItem(
                     name, help=click.utils.make_default_short_help(text))
                 for name, text in HELP_OF.items() if name.startswith(incomplete)]
        items.extend(click.Command.shell_complete(self, ctx, incomplete))
        return items


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        typer.echo(f"skillq {version('skillq')}")
        raise typer.Exit()


app = typer.Typer(
    name="skillq",
    cls=LazyGroup,
    help="Modular, tested, distributed skills.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@app.callback()
def _root(
    version: Annotated[bool, typer.Option(
        "--version", callback=_print_version, is_eager=True,
        help="Print skillq's version and exit.")] = False,
) -> None:
    """`skillq`'s own options; typer needs a callback to make the app a group."""


USAGE_EXIT = 2  # as click's usage errors


def _not_utf8_arg() -> str | None:
    """What is wrong with the first command-line argument that is not UTF-8, or None."""
    from shared.valuetypes import shown_text, text_problem

    for arg in sys.argv[1:]:
        if text_problem(arg):
            return (f"the argument {shown_text(arg)} is not valid UTF-8 text; give it in "
                    "UTF-8 (check the bytes given, or the terminal's locale)")
    return None


def main() -> None:
    """Console entry point: a SkillqError is a message and an exit code, never a traceback.

    Click handles usage errors itself (exit 2) in standalone mode.
    """
    try:
        app()
    except SkillqError as exc:
        from orchestrator.cli.common import err

        err.print(f"error: {exc}", markup=False)
        sys.exit(exc.exit_code)
    except UnicodeEncodeError as exc:
        # Python decodes argv with surrogateescape: bytes that are not UTF-8 reach the
        # code as lone surrogates, which only fail where text must be UTF-8 (a database
        # query, a JSON body). Run inputs are refused where they are parsed
        # (shared/inputs.py); any other argument (a run id, a name) is named here.
        arg = _not_utf8_arg() if "surrogate" in exc.reason else None
        if arg is None:
            raise
        from orchestrator.cli.common import err

        err.print(f"error: {arg}", markup=False)
        sys.exit(USAGE_EXIT)
    except Exception as exc:
        from orchestrator.cli.common import err
        from shared.db.outage import first_line, is_outage
        from shared.errors import DatabaseUnreachable

        if not is_outage(exc):
            raise
        # Before anything was recorded (a run that waits through an outage says so
        # itself): where the database is, and what to look at.
        err.print(f"error: the database is unreachable ({first_line(exc)}); check that "
                  "PostgreSQL runs (`skillq status`, or SKILLQ_DATABASE_URL)", markup=False)
        sys.exit(DatabaseUnreachable.exit_code)
    finally:
        # The interpreter's last collection walks every object a run's imports made: a
        # wait the user sees after the result. Frozen, they are left to the process's exit.
        gc.freeze()
