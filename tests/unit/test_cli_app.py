"""The lazy command table of orchestrator/cli/app.py against what the modules register.

`skillq --help` lists commands from app.COMMANDS without importing their modules; these
tests keep that table true (every module's commands, with the help click would print),
and check in a fresh interpreter that `--help` and `-h` import no command module.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.cli import app as cli_app

CLI = Path(cli_app.__file__).parent
HUGE = 10**6  # a width at which click shortens a help text to its first sentence only


def registering_modules() -> set[str]:
    """The modules under orchestrator/cli/ that add commands (read, not imported)."""
    return {p.stem for p in CLI.glob("*.py")
            if re.search(r"^def register\(", p.read_text(encoding="utf-8"), re.M)}


def test_every_module_that_registers_commands_is_in_the_table() -> None:
    assert registering_modules() == set(cli_app.MODULE_OF.values())


@pytest.mark.parametrize("module", sorted(set(cli_app.MODULE_OF.values())))
def test_table_names_and_help_match_what_the_module_registers(module: str) -> None:
    registered = cli_app.commands_of(module)
    listed = [name for name, owner, _ in cli_app.COMMANDS if owner == module]
    assert sorted(listed) == sorted(registered), (
        f"app.COMMANDS lists {listed} for {module}; it registers {sorted(registered)}")
    for name in listed:
        real = registered[name].get_short_help_str(HUGE)
        assert cli_app.HELP_OF[name] == real, f"{name}: the table's help drifted"


def test_table_has_no_duplicates_and_help_is_one_sentence() -> None:
    names = [name for name, _, _ in cli_app.COMMANDS]
    assert len(names) == len(set(names))
    for name, text in cli_app.HELP_OF.items():
        assert "\n" not in text and text.endswith("."), name


PROBE = """
import json, sys
sys.argv = ["skillq", *json.loads(sys.argv[1])]
from orchestrator.cli.app import main
try:
    main()
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""


def imported_by(*args: str) -> tuple[str, set[str]]:
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(args)],
                          capture_output=True, text=True, timeout=60, check=False)
    *_, modules = done.stderr.strip().splitlines()
    return done.stdout, set(json.loads(modules))


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_lists_every_command_and_imports_none_of_their_modules(flag: str) -> None:
    shown, modules = imported_by(flag)
    listed = re.findall(r"^  ([a-z][a-z-]*)\s", shown.split("Commands:")[1], re.M)
    assert listed == [name for name, _, _ in cli_app.COMMANDS]
    for option in ("--version", "--install-completion", "--show-completion", "-h, --help"):
        assert option in shown
    loaded = {m for m in modules if m.split(".")[0] in {"sqlalchemy", "celery", "alembic",
                                                        "pydantic", "yaml", "psycopg"}}
    assert not loaded, f"`skillq {flag}` imported {sorted(loaded)}"
    commands = {m for m in modules if m.startswith("orchestrator.cli.")}
    # light_params: the group's own parameters, read without pydantic (no commands)
    assert commands <= {"orchestrator.cli.app", "orchestrator.cli.light_params"}, commands


def test_a_subcommand_help_imports_only_its_own_module() -> None:
    shown, modules = imported_by("graph", "-h")
    assert "Usage: skillq graph" in shown
    commands = {m for m in modules if re.fullmatch(r"orchestrator\.cli\.\w+_cmds?", m)}
    assert commands == {"orchestrator.cli.graph_cmd"}
