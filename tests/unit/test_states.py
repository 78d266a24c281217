"""The transition tables of run and step states (shared/states.py): what may follow what."""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

import pytest

from shared.errors import IllegalTransition, SkillqError
from shared.states import (
    RUN_TRANSITIONS,
    STEP_TRANSITIONS,
    RunState,
    StepState,
    check_run,
    check_step,
    run_sources,
    step_sources,
)

REPO = Path(__file__).resolve().parents[2]


def test_every_state_has_a_row_and_terminal_states_lead_nowhere() -> None:
    assert set(RUN_TRANSITIONS) == set(RunState)
    assert set(STEP_TRANSITIONS) == set(StepState)
    for run_state in RunState:
        assert (not RUN_TRANSITIONS[run_state]) == run_state.terminal
    for step_state in StepState:
        if step_state.terminal and step_state != StepState.FAILED:
            assert not STEP_TRANSITIONS[step_state], step_state


@pytest.mark.parametrize(("old", "new"), [
    (RunState.PENDING, RunState.RUNNING), (RunState.RUNNING, RunState.SUCCEEDED),
    (RunState.RUNNING, RunState.FAILED), (RunState.PENDING, RunState.FAILED),
    (RunState.PENDING, RunState.CANCELLED), (RunState.RUNNING, RunState.CANCELLED)])
def test_allowed_run_transitions(old: RunState, new: RunState) -> None:
    check_run(old, new)


def test_a_finished_run_never_changes() -> None:
    for old, new in itertools.product([s for s in RunState if s.terminal], RunState):
        with pytest.raises(IllegalTransition):
            check_run(old, new)
    with pytest.raises(IllegalTransition, match="pending to succeeded"):
        check_run(RunState.PENDING, RunState.SUCCEEDED)  # it never ran


@pytest.mark.parametrize(("old", "new"), [
    (StepState.PENDING, StepState.RUNNING), (StepState.PENDING, StepState.CANCELLED),
    (StepState.RUNNING, StepState.SUCCEEDED), (StepState.RUNNING, StepState.FAILED),
    (StepState.RUNNING, StepState.RETRYING), (StepState.RUNNING, StepState.LOST),
    (StepState.RUNNING, StepState.CANCELLED), (StepState.FAILED, StepState.SKIPPED),
    (StepState.RUNNING, StepState.WAITING),
    (StepState.WAITING, StepState.PENDING), (StepState.WAITING, StepState.CANCELLED)])
def test_allowed_step_transitions(old: StepState, new: StepState) -> None:
    check_step(old, new)


@pytest.mark.parametrize(("old", "new"), [
    (StepState.PENDING, StepState.SUCCEEDED),  # a result needs a claim first
    (StepState.PENDING, StepState.SKIPPED), (StepState.SUCCEEDED, StepState.FAILED),
    (StepState.SKIPPED, StepState.FAILED), (StepState.LOST, StepState.RUNNING),
    (StepState.RETRYING, StepState.RUNNING), (StepState.CANCELLED, StepState.RUNNING),
    (StepState.FAILED, StepState.SUCCEEDED), (StepState.RUNNING, StepState.PENDING),
    (StepState.WAITING, StepState.RUNNING), (StepState.WAITING, StepState.SUCCEEDED),
    # taking over a running attempt runs it twice (a nested run's: two nested runs)
    (StepState.RUNNING, StepState.RUNNING)])
def test_forbidden_step_transitions(old: StepState, new: StepState) -> None:
    with pytest.raises(IllegalTransition, match=f"from {old} to {new}"):
        check_step(old, new)


def test_sources_are_read_off_the_tables() -> None:
    assert step_sources(StepState.RUNNING) == (StepState.PENDING,)
    assert step_sources(StepState.CANCELLED) == (StepState.PENDING, StepState.RUNNING,
                                                 StepState.WAITING)
    assert step_sources(StepState.WAITING) == (StepState.RUNNING,)
    assert step_sources(StepState.PENDING) == (StepState.WAITING,)
    assert step_sources(StepState.SKIPPED) == (StepState.FAILED,)
    assert run_sources(RunState.CANCELLED) == (RunState.PENDING, RunState.RUNNING)
    assert run_sources(RunState.PENDING) == ()


def test_final_means_no_attempt_follows() -> None:
    assert {s for s in StepState if s.final} == {
        StepState.SUCCEEDED, StepState.FAILED, StepState.SKIPPED, StepState.CANCELLED}
    assert not StepState.RETRYING.final and not StepState.LOST.final


def test_an_illegal_transition_is_a_skillq_error() -> None:
    assert issubclass(IllegalTransition, SkillqError)


def _state_writes(tree: ast.AST) -> list[int]:
    """Lines that set a record's state: ``x.state = ...`` (but an executor's proposed
    ``result``, which the writer records), ``state=`` in a record's constructor or in an
    UPDATE's ``values()``, and SQL text that says ``SET state``."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Attribute) and target.attr == "state" and not (
                        isinstance(target.value, ast.Name) and target.value.id == "result"):
                    lines.append(node.lineno)
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else \
                func.attr if isinstance(func, ast.Attribute) else ""
            if name in ("PipelineRun", "StepRun", "Wait", "values") and any(
                    k.arg == "state" for k in node.keywords):
                lines.append(node.lineno)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and "SET state" in node.value:
            lines.append(node.lineno)
    return lines


def test_only_lifecycle_transitions_writes_states() -> None:
    """Every write of a run or step state is in the one writer."""
    writers = {}
    for path in sorted(REPO.glob("*/**/*.py")):
        rel = path.relative_to(REPO).as_posix()
        if rel.startswith((".venv/", "tests/", "benchmarks/", "shared/db/migrations/",
                           "examples/")):
            continue
        if lines := _state_writes(ast.parse(path.read_text())):
            writers[rel] = lines
    own = "lifecycle/transitions/"  # the one writer: a package, a module per record
    assert any(k.startswith(own) for k in writers)  # the check finds the writer's writes
    others = {k: v for k, v in writers.items() if not k.startswith(own)}
    assert not others, f"state written outside {own}: {others}"
