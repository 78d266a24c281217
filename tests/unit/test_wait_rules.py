"""Waits for a person, the parts that need no server: the approval step as a manifest
and a plan, its checks, the wait states, and what an answer must be
(shared/manifest.py, shared/pipeline_checks.py, shared/plan.py, shared/states.py,
lifecycle/waits.py; docs/waits.md)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from pydantic import ValidationError

from lifecycle.waits import answer_value, form_manifest, may_ask
from shared.db.wait_models import APPROVAL, QUESTION, Wait
from shared.errors import IllegalTransition, WaitError
from shared.manifest import Step
from shared.plan import build_plan
from shared.queues import CONTROL_QUEUE
from shared.states import RunState, WaitState, check_run, check_wait
from shared.vault import load_vault

VAULT = Path(__file__).parent.parent / "integration" / "vaults" / "waits"


def test_an_approval_step_takes_no_skill_and_a_step_needs_one_or_the_other() -> None:
    step = Step.model_validate({"id": "review", "approval": {"message": "Go?"}})
    assert step.skill_name == "skillq-approval" and step.skill_version is None
    with pytest.raises(ValidationError, match="needs `skill: NAME`"):
        Step.model_validate({"id": "nothing"})
    with pytest.raises(ValidationError, match="takes no skill, with or for_each"):
        Step.model_validate({"id": "both", "skill": "echo", "approval": {"message": "Go?"}})
    with pytest.raises(ValidationError, match="on_timeout"):
        Step.model_validate({"id": "r", "approval": {"message": "Go?", "on_timeout": "x"}})


def test_the_waits_vault_is_valid_and_plans_the_approval_on_the_control_queue() -> None:
    vault = load_vault(VAULT)
    assert vault.valid, vault.problems
    plan = build_plan(vault.get("review-post"), vault.skills, {"topic": "cats"})
    review = plan.step("review")
    assert (review.kind, review.queue, review.skill, review.after) == (
        "approval", CONTROL_QUEUE, "skillq-approval", ("draft",))
    assert review.with_["defaults"] == {"final_text": "${steps.draft.outputs.text}",
                                        "channel": "blog"}
    assert [f["name"] for f in review.with_["form"]] == ["final_text", "channel"]
    assert plan.step("publish").after == ("review",)  # it reads the approver's text


def _edited(tmp_path: Path, old: str, new: str) -> list[str]:
    root = shutil.copytree(VAULT, tmp_path / "vault")
    md = root / "review-post" / "SKILL.md"
    md.write_text(md.read_text().replace(old, new))
    return [str(p) for p in load_vault(root).problems]


def test_a_later_step_must_read_one_of_the_approvals_inputs(tmp_path: Path) -> None:
    problems = _edited(tmp_path, "${steps.review.outputs.final_text}",
                       "${steps.review.outputs.final}")
    assert any("approval step 'review' takes no input 'final'" in p and
               "final_text, channel" in p for p in problems), problems


def test_an_approval_inputs_default_must_fit_its_type(tmp_path: Path) -> None:
    problems = _edited(tmp_path, "          default: blog\n", "          default: 3\n")
    assert any("approver's input 'channel' is declared string" in p for p in problems), \
        problems


def test_an_approval_refers_only_to_steps_that_exist(tmp_path: Path) -> None:
    problems = _edited(tmp_path, "draft: ${steps.draft.outputs.text}",
                       "draft: ${steps.drafts.outputs.text}")
    assert any("no step 'drafts'" in p for p in problems), problems


def test_wait_states_and_the_rejected_run() -> None:
    for new in WaitState:
        if new is not WaitState.OPEN:
            check_wait(WaitState.OPEN, new)
            with pytest.raises(IllegalTransition):
                check_wait(new, WaitState.OPEN)  # the first decision counts
    check_run(RunState.RUNNING, RunState.REJECTED)
    assert RunState.REJECTED.terminal
    with pytest.raises(IllegalTransition):
        check_run(RunState.REJECTED, RunState.RUNNING)


def _question(choices: list[str], free_text: bool) -> Wait:
    return Wait(id=7, kind=QUESTION, prompt="Which tone?", choices=choices,
                free_text=free_text, form=[], state="open")


def test_an_answer_must_fit_its_question() -> None:
    closed = _question(["dry", "warm"], free_text=False)
    assert answer_value(closed, None, 2) == "warm"
    assert answer_value(closed, "dry", None) == "dry"
    with pytest.raises(WaitError, match="1 to 2"):
        answer_value(closed, None, 3)
    with pytest.raises(WaitError, match="takes one of its choices"):
        answer_value(closed, "spicy", None)
    with pytest.raises(WaitError, match="give an answer"):
        answer_value(closed, "  ", None)
    assert answer_value(_question(["dry"], free_text=True), "spicy", None) == "spicy"
    with pytest.raises(WaitError, match="offers no choices"):
        answer_value(_question([], free_text=True), None, 1)


def test_an_approvals_form_is_its_typed_inputs_with_resolved_defaults() -> None:
    wait = Wait(id=3, kind=APPROVAL, step_id="review", prompt="Go?", choices=[],
                free_text=True, default={"final_text": "Draft about cats"},
                form=[{"name": "final_text", "type": "string"},
                      {"name": "count", "type": "integer"}], state="open")
    form = form_manifest(wait)
    spec = form.input("final_text")
    assert spec is not None and spec.default == "Draft about cats" and spec.has_default
    count = form.input("count")
    assert count is not None and not count.has_default


@pytest.mark.parametrize(("trigger", "interactive", "asks"), [
    ("cli", False, True), ("try", False, True), ("dashboard", False, True),
    ("mcp", False, True), ("retry", False, True),
    ("schedule:4", False, False), ("schedule:4", True, False),  # never waits for anyone
    ("test:case-1", False, False), ("test:case-1", True, True), (None, True, True),
])
def test_who_may_be_asked(trigger: str | None, interactive: bool, asks: bool) -> None:
    assert may_ask(trigger, interactive) is asks
