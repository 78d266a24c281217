"""Script assertions (issue 45): a test case's checker script, run after a successful run
by the built-in code skill skillq-check on the queues (source `eval`), in a worker's
sandbox: exit 0 passes, any other exit fails with what it printed, and a checker that
cannot run says why. Checked through orchestrator/evals/scripts.py's ``check_scripts``
(what `skillq eval` calls after its judge assertions), and through `skillq eval`."""

from __future__ import annotations

import json
import shutil
import socket
import tempfile
import urllib.parse
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Stack

from orchestrator.connect import Connection, connect
from orchestrator.evals.scripts import check_scripts
from shared.builtin import CHECK
from shared.case_judge import CaseResult, Check, Outcome, judge
from shared.skill import Skill
from shared.skillfiles import TestCase
from shared.states import RunState
from shared.vault import open_vault

pytestmark = pytest.mark.integration

# A checker by the protocol (docs/eval-scripts.md): the outputs on stdin, argv[1] the
# path of {"inputs", "outputs"}; it passes when the line names the case's person.
LINE_OK = """\
import json, sys
outputs = json.load(sys.stdin)
case = json.load(open(sys.argv[1]))
line, name = outputs["line"], case["inputs"]["name"]
assert case["outputs"] == outputs
if name in line:
    print(f"the line names {name}")
    sys.exit(0)
print(f"the line {line!r} does not name {name}", file=sys.stderr)
sys.exit(3)
"""


def greet_skill(root: Path, k: str, assertions: list[dict[str, Any]],
                checkers: dict[str, str]) -> str:
    """A code skill that greets a person (and turns away "nobody"), whose two cases
    carry ``assertions``; ``checkers``: files of its folder, by path."""
    name = f"greet-{k}"
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: Greet a person by name. Use it to say hello.\n"
        "version: 1\napproach: code\ninputs:\n"
        "  - {name: name, type: string, required: true}\n"
        "outputs:\n  - {name: line, type: string}\n"
        "run:\n  command: python3 greet.py\n  timeout: 30\n  retries: 0\n---\n\n"
        "# greet\n\nA test fixture.\n")
    (folder / "greet.py").write_text(
        "import json, os\n"
        "name = json.load(open(os.environ['SKILL_INPUTS']))['name']\n"
        "print(json.dumps({'line': 'Go away' if name == 'nobody' else f'Hello {name}!'}))\n")
    for path, text in checkers.items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_text(text)
    (folder / "benchmarks.json").write_text(json.dumps({
        "skill": name, "version": 1, "runs": [],
        "tests": [{"id": "ada", "inputs": {"name": "Ada"}, "assertions": assertions},
                  {"id": "nobody", "inputs": {"name": "nobody"},
                   "assertions": assertions}]}))
    return name


@pytest.fixture
def conn(healthy: Stack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
         ) -> Iterator[Connection]:
    """A client of the test stack in this process, as the CLI connects."""
    monkeypatch.chdir(tmp_path)  # no .env of anyone's
    for key, value in healthy.cli_env.items():
        if key.startswith("SKILLQ_"):
            monkeypatch.setenv(key, value)
    made = connect(workers=False)
    try:
        yield made
    finally:
        made.app.close()


def skill_and_case(vault: Path, name: str, case_id: str = "ada") -> tuple[Skill, TestCase]:
    skill = open_vault(vault, ttl_s=0).skills[name]
    assert skill.benchmarks is not None
    return skill, next(c for c in skill.benchmarks.tests if c.id == case_id)


def ran(case: TestCase, outputs: dict[str, Any], skill: str) -> CaseResult:
    """The verdict on a run of ``case`` that succeeded with ``outputs``."""
    return judge(case, Outcome(state=RunState.SUCCEEDED.value, outputs=outputs), skill)


def check_runs(stack: Stack, before: set[str]) -> list[Any]:
    return [r for r in stack.runs_of(CHECK) if r.id not in before]


def test_a_script_assertion_passes_for_one_output_and_fails_for_another(
        healthy: Stack, conn: Connection, tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    name = greet_skill(vault, uuid.uuid4().hex[:6], [{"script": "checks/line_ok.py"}],
                       {"checks/line_ok.py": LINE_OK})
    skill, case = skill_and_case(vault, name)
    before = healthy.run_ids(CHECK)
    unchecked = ran(case, {"line": "Hello Ada!"}, name)
    assert unchecked.unchecked == ("script",)

    good = check_scripts(conn, open_vault(vault, ttl_s=0), skill, case, unchecked, None)
    assert (good.passed, good.problems, good.unchecked) == (True, (), ())
    assert good.checks[-1] == Check("script checks/line_ok.py", True)

    bad = check_scripts(conn, open_vault(vault, ttl_s=0), skill, case,
                        ran(case, {"line": "Go away"}, name), None)
    assert bad.passed is False and bad.unchecked == ()
    assert bad.checks[-1] == Check("script checks/line_ok.py", False)
    assert bad.problems == ("script checks/line_ok.py failed (exit 3): the line 'Go away' "
                            "does not name Ada",)

    # each check a run of the built-in on the queues, recorded as the eval's
    runs = check_runs(healthy, before)
    assert len(runs) == 2
    assert {(r.source, r.triggered_by, r.state) for r in runs} == {
        ("eval", "check:ada", "succeeded")}


def test_a_run_that_failed_is_left_unchecked(healthy: Stack, conn: Connection,
                                             tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    name = greet_skill(vault, uuid.uuid4().hex[:6], [{"script": "checks/line_ok.py"}],
                       {"checks/line_ok.py": LINE_OK})
    skill, case = skill_and_case(vault, name)
    failed = judge(case, Outcome(state=RunState.FAILED.value, error="boom"), name)
    before = healthy.run_ids(CHECK)
    assert check_scripts(conn, open_vault(vault, ttl_s=0), skill, case, failed, None) is failed
    assert check_runs(healthy, before) == []


def test_each_checker_by_its_interpreter_and_one_that_cannot_run(
        healthy: Stack, conn: Connection, tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    name = greet_skill(
        vault, uuid.uuid4().hex[:6],
        [{"script": "checks/says_hello.sh"}, {"script": "checks/odd.chk"},
         {"script": "checks/by_hashbang"}],
        {"checks/says_hello.sh": 'grep -q Hello && echo "a hello, from $0"\n',
         "checks/odd.chk": "no interpreter for this\n",
         "checks/by_hashbang": "#!/bin/sh\necho 'nothing here' >&2\nexit 5\n"})
    skill, case = skill_and_case(vault, name)
    got = check_scripts(conn, open_vault(vault, ttl_s=0), skill, case,
                        ran(case, {"line": "Hello Ada!"}, name), None)
    assert got.checks[-3:] == (Check("script checks/says_hello.sh", True),
                               Check("script checks/odd.chk", False),
                               Check("script checks/by_hashbang", False))
    cannot, failed = got.problems
    assert cannot.startswith("script checks/odd.chk could not run: "), cannot
    assert "no interpreter for the checker odd.chk" in cannot, cannot
    assert failed == "script checks/by_hashbang failed (exit 5): nothing here"
    assert got.passed is False


@pytest.fixture
def outside_tmp() -> Iterator[Path]:
    """A folder outside /tmp (which the sandbox replaces with its own) and outside the
    folders the test stack binds into every step: where a vault on a daemon lies, seen
    by a step through the sandbox's read-only view of the machine. Open to anyone, so
    that only the sandbox stands between a checker and it."""
    folder = Path(tempfile.mkdtemp(prefix="skillq-eval-scripts-", dir="/var/tmp"))
    folder.chmod(0o777)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_a_checker_cannot_write_into_the_skill_folder_nor_reach_the_network(
        healthy: Stack, conn: Connection, outside_tmp: Path) -> None:
    vault = outside_tmp / "vault"
    k = uuid.uuid4().hex[:6]
    target = vault / f"greet-{k}"
    redis = urllib.parse.urlsplit(healthy.endpoints.broker_url)
    socket.create_connection((redis.hostname, redis.port), timeout=5).close()  # from here
    tries = f"""\
import os, socket, sys
from pathlib import Path
done = []
for path in (Path({str(target / "written.txt")!r}), Path({str(target / "greet.py")!r})):
    try:
        with path.open("a") as fh:
            fh.write("tampered")
        done.append(f"wrote {{path.name}}")
    except OSError as exc:
        done.append(f"{{path.name}}: {{exc.strerror}}")
try:
    socket.create_connection(({redis.hostname!r}, {redis.port}), timeout=5).close()
    done.append("reached redis")
except OSError:
    done.append("no network")
done.append("env: " + ",".join(sorted(k for k in os.environ if k.startswith("SKILL"))))
print("; ".join(done))
sys.exit(7)  # to be reported with what it printed
"""
    name = greet_skill(vault, k, [{"script": "checks/tamper.py"}], {"checks/tamper.py": tries})
    for path in target.rglob("*"):  # anyone's to write, but for the sandbox
        path.chmod(0o777 if path.is_dir() else 0o666)
    target.chmod(0o777)
    original = (target / "greet.py").read_text()
    skill, case = skill_and_case(vault, name)
    got = check_scripts(conn, open_vault(vault, ttl_s=0), skill, case,
                        ran(case, {"line": "Hello Ada!"}, name), None)
    # the machine is read-only to a step, the skill's folder as the rest; no network;
    # of skillq's variables only the attempt's tag (workers/attempt_end.py), not the
    # check step's own protocol
    assert got.problems == ("script checks/tamper.py failed (exit 7): written.txt: "
                            "Read-only file system; greet.py: Read-only file system; "
                            "no network; env: SKILLQ_STEP_RUN",)
    assert not (target / "written.txt").exists()
    assert (target / "greet.py").read_text() == original


def test_skillq_eval_reports_a_failed_script_assertion(healthy: Stack, tmp_path: Path
                                                       ) -> None:
    vault = tmp_path / "vault"
    name = greet_skill(vault, uuid.uuid4().hex[:6], [{"script": "checks/line_ok.py"}],
                       {"checks/line_ok.py": LINE_OK})
    done = healthy.cli("eval", name, "--vault", str(vault), "--json", cwd=tmp_path,
                       timeout_s=300)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    by_case = {r["case"]: r for r in report["runs"]}
    assert (by_case["ada"]["passed"], by_case["ada"]["problems"]) == (True, [])
    assert by_case["nobody"]["passed"] is False
    assert by_case["nobody"]["problems"] == [
        "script checks/line_ok.py failed (exit 3): the line 'Go away' does not name nobody"]
