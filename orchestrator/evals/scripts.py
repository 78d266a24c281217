"""A test case's script assertions (docs/eval-scripts.md), checked after a successful run
of `skillq eval`: each checker runs as a run of the built-in code skill skillq-check on the
queues (source ``eval``, triggered by ``check:CASE``), in a worker's sandbox, since the
orchestrator runs no skill's code itself. The checker travels as a ``file`` input (the
shared store), the run's outputs and the case's inputs as JSON text."""

from __future__ import annotations

import json
from typing import Any

from orchestrator.connect import Connection
from orchestrator.launch import launch_routed, wait_run
from orchestrator.testing import outcome_of
from shared.builtin import CHECK, builtin_skill
from shared.case_judge import CaseResult, Check
from shared.diagnosis import first_line
from shared.errors import InputError
from shared.inputs import local_paths
from shared.plan import build_plan
from shared.skill import Skill
from shared.skillfiles import RunSource, ScriptAssertion, TestCase
from shared.states import RunState
from shared.vault import Vault

CHECKED = "script"  # the kind CaseResult.unchecked names them by


def check_scripts(conn: Connection, vault: Vault, skill: Skill, case: TestCase,
                  verdict: CaseResult, cap: float | None) -> CaseResult:
    """The verdict with the case's script assertions checked, each by a run of the
    built-in skillq-check: one that exits 0 passes; any other exit fails with what it
    printed; one that could not run fails with why. A run that did not succeed is left
    as it is (its scripts unchecked), as judge assertions are. ``cap``: what the check's
    agent steps may spend (it has none: a code step costs nothing), as ``judge_assertions``
    takes it. NoWorker when no online worker serves the check's queue."""
    scripts = [a for a in case.assertions if isinstance(a, ScriptAssertion)]
    if not scripts or verdict.outcome.state != RunState.SUCCEEDED:
        return verdict
    checker = builtin_skill(CHECK)
    assert checker is not None  # shipped with the package
    checks: list[Check] = []
    problems: list[str] = []
    for found in scripts:
        passed, problem = _check_one(conn, vault, skill, case, checker, found.script,
                                     verdict.outcome.outputs, cap)
        checks.append(Check(f"script {found.script}", passed))
        if problem is not None:
            problems.append(problem)
    return verdict.with_checks(checks, problems, CHECKED)


def _check_one(conn: Connection, vault: Vault, skill: Skill, case: TestCase, checker: Skill,
               script: str, outputs: Any, cap: float | None) -> tuple[bool, str | None]:
    """Whether the checker ``script`` passed, and the problem when it did not."""
    folder = skill.folder.resolve()
    path = (folder / script).resolve()
    if not path.is_relative_to(folder):  # `skillq validate` says so too
        return False, f"script {script} could not run: it is outside the skill's folder"
    try:
        given = local_paths(checker.manifest, {
            "checker": str(path),
            "outputs": json.dumps(outputs, ensure_ascii=False),
            "case_inputs": json.dumps(dict(case.inputs), ensure_ascii=False)}, folder)
    except InputError as exc:  # no such file, or one too large to store
        return False, f"script {script} could not run: {first_line(str(exc), 300)}"
    plan = build_plan(checker, vault.skills, given).with_budget(cap)
    run_id = launch_routed(conn, vault, checker, given, plan=plan,
                           source=RunSource.EVAL.value, triggered_by=f"check:{case.id}")
    run = wait_run(conn, run_id)
    said = outcome_of(conn, run).outputs or {}
    if run.state != RunState.SUCCEEDED:
        return False, f"script {script} could not run: {first_line(run.error, 300)}"
    if said.get("passed"):
        return True, None
    code = said.get("exit_code")
    how = f"killed by signal {-code}" if isinstance(code, int) and code < 0 else f"exit {code}"
    return False, f"script {script} failed ({how}): {said.get('said') or '(printed nothing)'}"
