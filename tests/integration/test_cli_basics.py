"""The command line's basics against the real stack (tests/integration/conftest.py):
every command is reachable through the lazy command table, `--version`, `-h`, typer's
shell completion, the vault commands starting without Celery or Alembic, `--vault` on
`secrets list` and `up`, and the modes of the files `new`, `export` and `secrets set`
write under umask 022 (0644, and 0600 only for secrets), and shared/atomic.py's mode
rules behind them.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from importlib.metadata import version
from pathlib import Path

import pytest
from conftest import RunResult, Stack, skillq_argv

from orchestrator.cli.app import COMMANDS

pytestmark = pytest.mark.integration

RunSkill = Callable[..., RunResult]
HEAVY = ("celery", "alembic", "kombu")


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def imported(stderr: str) -> set[str]:
    """Top-level packages a command imported (its stderr under PYTHONPROFILEIMPORTTIME)."""
    return {m.split(".")[0] for m in re.findall(r"^import time:.*\|\s+(\S+)$", stderr, re.M)}


def cli_with_stdin(stack: Stack, *args: str, cwd: Path, stdin: str,
                   env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(skillq_argv(*args), env={**stack.cli_env, **env}, cwd=cwd,
                          input=stdin, capture_output=True, text=True, timeout=120,
                          check=False)


@pytest.fixture
def umask_022() -> Iterator[None]:
    """The usual umask for the commands this test starts (they inherit it)."""
    before = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(before)


def test_every_command_in_the_table_loads_and_answers_short_help(
        healthy: Stack, tmp_path: Path) -> None:
    def short_help(name: str) -> tuple[str, int, str]:
        done = healthy.cli(name, "-h", cwd=tmp_path, timeout_s=180)
        return name, done.returncode, done.stdout + done.stderr

    with ThreadPoolExecutor(max_workers=4) as pool:
        answers = list(pool.map(short_help, [name for name, _, _ in COMMANDS]))
    for name, code, text in answers:
        assert code == 0 and f"Usage: skillq {name} " in text, (name, text)
        assert "Traceback" not in text, (name, text)
    listing = healthy.cli("-h", cwd=tmp_path)
    assert listing.returncode == 0 and "-h, --help" in listing.stdout
    unknown = healthy.cli("lsit", cwd=tmp_path)
    assert unknown.returncode == 2 and "No such command 'lsit'" in unknown.stderr
    assert "Did you mean 'list'?" in unknown.stderr


def test_version_prints_the_installed_version(healthy: Stack, tmp_path: Path) -> None:
    done = healthy.cli("--version", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"skillq {version('skillq')}\n"


def test_shell_completion_completes_commands_and_a_commands_options(
        healthy: Stack, tmp_path: Path) -> None:
    def complete(words: str) -> list[str]:
        done = healthy.cli(cwd=tmp_path, env={
            "_SKILLQ_COMPLETE": "complete_bash", "COMP_WORDS": words,
            "COMP_CWORD": str(len(words.split()) - 1)})
        assert done.returncode == 0, done.stderr
        return done.stdout.split()

    assert complete("skillq ca") == ["catalog", "cancel"]
    assert complete("skillq secrets l") == ["list"]
    assert complete("skillq validate --sp") == ["--spec"]
    script = healthy.cli("--show-completion", "bash", cwd=tmp_path)
    assert script.returncode == 0 and "_SKILLQ_COMPLETE=complete_bash" in script.stdout


def test_vault_commands_start_without_celery_or_alembic(
        healthy: Stack, vault: Path, tmp_path: Path, run_skill: RunSkill) -> None:
    assert run_skill("echo", vault, inputs={"text": "hi"}).code == 0  # `run`, lazily found
    pinned = healthy.cli("pin", "echo", "--vault", str(vault), cwd=tmp_path)
    assert pinned.returncode == 0, pinned.stderr
    profile = {"PYTHONPROFILEIMPORTTIME": "1"}

    listed = healthy.cli("list", "--vault", str(vault), cwd=tmp_path, env=profile)
    assert listed.returncode == 0, listed.stderr
    # The library state came from PostgreSQL: the pin is shown, nothing says it is missing.
    # name, label, kind, approach, version, pin, state
    assert re.search(r"^echo\s+Echo\s+script\s+code\s+1\s+1\s+enabled\s", listed.stdout,
                     re.M), listed.stdout
    assert "not shown" not in listed.stderr
    assert not imported(listed.stderr) & set(HEAVY), sorted(imported(listed.stderr))

    # show and catalog read the library state too (SQLAlchemy); validate and --help
    # read nothing but files.
    for args, needless in ((("show", "echo", "--vault", str(vault)), HEAVY),
                           (("catalog", "--vault", str(vault)), HEAVY),
                           (("validate", str(vault)), (*HEAVY, "sqlalchemy", "psycopg")),
                           (("--help",), (*HEAVY, "sqlalchemy", "psycopg", "pydantic"))):
        done = healthy.cli(*args, cwd=tmp_path, env=profile)
        assert done.returncode == 0, (args, done.stdout, done.stderr[-2000:])
        assert not imported(done.stderr) & set(needless), (
            args, sorted(imported(done.stderr) & set(needless)))


def test_new_and_export_write_0644_files_and_secrets_stay_0600(
        healthy: Stack, tmp_path: Path, umask_022: None) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    made = healthy.cli("new", "greeter", "--vault", str(vault), cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    files = sorted(p for p in (vault / "greeter").rglob("*") if p.is_file())
    assert {p.name for p in files} >= {"SKILL.md", "plan.md", "benchmarks.json",
                                       "sub-skills.json", "main.py"}
    assert {p.name: oct(mode(p)) for p in files} == {p.name: "0o644" for p in files}
    assert mode(vault / "greeter") == 0o755

    out = tmp_path / "out"
    exported = healthy.cli("export", "greeter", "--agentskills", str(out), "--vault",
                           str(vault), cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr
    written = [p for p in (out / "greeter").rglob("*") if p.is_file()]
    assert written and all(mode(p) == 0o644 for p in written), \
        {p.name: oct(mode(p)) for p in written}

    home = tmp_path / "home"
    home.mkdir(mode=0o755)  # a SKILLQ_HOME open to others: the secrets file still is not
    stored = cli_with_stdin(healthy, "secrets", "set", "api_token", cwd=tmp_path,
                            env={"SKILLQ_HOME": str(home)}, stdin="s3cret\n")
    assert stored.returncode == 0, stored.stderr
    assert mode(home / "secrets.toml") == 0o600
    assert "s3cret" not in stored.stdout + stored.stderr


def test_secrets_list_names_the_vaults_declared_secrets_set_or_not(
        healthy: Stack, vault: Path, tmp_path: Path) -> None:
    declaring = vault / "needs-keys"
    declaring.mkdir()
    (declaring / "SKILL.md").write_text(
        "---\nname: needs-keys\ndescription: Calls an API. Use it to test secrets.\n"
        "version: 1\nauth: [api_token, other_key]\napproach: code\n"
        "run:\n  command: python3 -c pass\n---\n\n# needs-keys\n")
    home = tmp_path / "home"
    env = {"SKILLQ_HOME": str(home), "SKILLQ_SECRET_FROM_ENV": "x"}
    assert cli_with_stdin(healthy, "secrets", "set", "api_token", cwd=tmp_path, env=env,
                          stdin="v@lue\n").returncode == 0

    listed = healthy.cli("secrets", "list", "--vault", str(vault), cwd=tmp_path, env=env)
    assert listed.returncode == 0, listed.stderr
    header, *rows = [line.split("\t") for line in listed.stdout.splitlines()]
    assert header == ["name", "source", "skills"]
    assert ["api_token", str(home / "secrets.toml"), "needs-keys"] in rows
    assert ["other_key", "not set", "needs-keys"] in rows
    assert ["from_env", "environment", "-"] in rows
    assert "1 declared secret(s) not set" in listed.stderr
    assert "v@lue" not in listed.stdout + listed.stderr

    as_json = healthy.cli("secrets", "list", "--vault", str(vault), "--json", cwd=tmp_path,
                          env=env)
    assert {"name": "other_key", "source": None, "skills": ["needs-keys"]} in \
        json.loads(as_json.stdout)

    missing = healthy.cli("secrets", "list", "--vault", str(tmp_path / "nope"),
                          cwd=tmp_path, env=env)
    assert missing.returncode == 2 and "does not exist" in missing.stderr
    assert "Traceback" not in missing.stderr


def test_up_refuses_a_vault_that_is_not_a_folder(healthy: Stack, tmp_path: Path) -> None:
    done = healthy.cli("up", "--vault", str(tmp_path / "nope"), cwd=tmp_path,
                       env={"SKILLQ_HOME": str(tmp_path / "home")})
    assert done.returncode == 2, done.stdout + done.stderr
    assert "is not a folder" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "home").exists()  # refused before anything started


def test_atomic_writes_keep_modes_and_private_folders_stay_private(
        tmp_path: Path, umask_022: None) -> None:
    from shared.atomic import write_json, write_text

    public = tmp_path / "public"
    public.mkdir()
    made = public / "notes.md"
    write_text(made, "one")
    assert mode(made) == 0o644
    made.chmod(0o755)  # a script someone made executable stays so when rewritten
    write_text(made, "two")
    assert (mode(made), made.read_text()) == (0o755, "two")
    secret = public / "secrets.toml"
    write_text(secret, 'k = "v"\n', private=True)
    assert mode(secret) == 0o600

    home = tmp_path / "home"
    home.mkdir(mode=0o710)  # as SKILLQ_HOME: others may not list it
    state = home / "state.json"
    write_json(state, {"port": 1})
    assert mode(state) == 0o600
    state.chmod(0o666)  # left wide by an older skillq: narrowed on the next write
    write_json(state, {"port": 2})
    assert mode(state) == 0o600
    assert sorted(p.name for p in [*public.iterdir(), *home.iterdir()]) == [
        "notes.md", "secrets.toml", "state.json"]  # no temporary file left behind
