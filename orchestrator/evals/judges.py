"""A case's judge assertions, checked after a successful run of an eval: each by a run of
the built-in skillq-judge on the queues (source ``eval``, its cost apart from the
skill's), on the model the assertion names, else the vault's (evals.json), else the
daemon's default."""

from __future__ import annotations

import json
from collections.abc import Callable

from lifecycle.run_costs import Usage
from orchestrator.connect import Connection
from orchestrator.evals.costs import plus, usage_of
from orchestrator.launch import launch_routed, wait_run
from orchestrator.testing import outcome_of
from shared.builtin import JUDGE, builtin_skill
from shared.case_judge import CaseResult, Check
from shared.plan import build_plan
from shared.skillfiles import JudgeAssertion, RunSource, TestCase
from shared.states import RunState
from shared.vault import Vault

CapFn = Callable[[], float | None]  # what the next judge run may spend, asked just before


def judge_assertions(conn: Connection, vault: Vault, case: TestCase, verdict: CaseResult,
                     cap: CapFn, vault_model: str | None) -> tuple[CaseResult, Usage]:
    """The verdict with the case's judge assertions checked: a failed one adds the
    statement and the evidence the judge quoted. ``vault_model``: the vault's judge
    model (shared/vault_evals.py), for a statement that names none."""
    judges = [a for a in case.assertions if isinstance(a, JudgeAssertion)]
    if not judges or verdict.outcome.state != RunState.SUCCEEDED:
        return verdict, Usage()
    skill = builtin_skill(JUDGE)
    assert skill is not None  # shipped with the package
    checks, problems, spent = [], [], Usage()
    for found in judges:
        given = {"statement": found.judge,
                 "outputs": json.dumps(verdict.outcome.outputs, ensure_ascii=False)}
        plan = build_plan(skill, vault.skills, given).with_budget(cap())
        model = found.model or vault_model
        if model:
            plan = plan.with_requested_model(model)
        run_id = launch_routed(conn, vault, skill, given, plan=plan,
                               source=RunSource.EVAL.value, triggered_by=f"judge:{case.id}")
        run = wait_run(conn, run_id)
        spent = plus(spent, usage_of(conn, run_id))
        said = outcome_of(conn, run).outputs or {}
        held = run.state == RunState.SUCCEEDED and bool(said.get("passed"))
        checks.append(Check(f"judge: {found.judge}", held))
        if run.state != RunState.SUCCEEDED:
            problems.append(f"judge '{found.judge}' could not decide: {run.error}")
        elif not held:
            problems.append(f"judge: '{found.judge}' does not hold; evidence: "
                            f"{said.get('evidence', '')!r}")
    return verdict.with_checks(checks, problems, "judge"), spent
