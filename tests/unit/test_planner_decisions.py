"""The planner's decisions from plain data (lifecycle/planner/decisions.py), and the
transition table of a step's progress (shared/states.py) they are checked against."""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from lifecycle.planner.decisions import (
    MAX_BATCH,
    Progress,
    Settled,
    batch_size,
    may_batch,
    settle,
    watch_at,
)
from shared.errors import IllegalTransition
from shared.manifest import OnFailure
from shared.plan import Plan, PlanStep
from shared.states import PROGRESS_TRANSITIONS, StepProgress, check_progress


def step(step_id: str, *after: str, fans_out: bool = False,
         on_failure: OnFailure = OnFailure.ABORT) -> PlanStep:
    return PlanStep(id=step_id, skill=f"{step_id}-skill", version=1, kind="script",
                    queue="script", after=after, on_failure=on_failure,
                    for_each="${inputs.xs}" if fans_out else None)


# a -> b -> d, a -> c -> d
PLAN = Plan(skill="p", version=1, steps=(step("a"), step("b", "a"), step("c", "a"),
                                         step("d", "b", "c")))


# -- the table --------------------------------------------------------------------------

def test_the_stored_values_are_the_ledger_s_strings() -> None:
    assert [s.value for s in StepProgress] == ["waiting", "running", "done"]
    assert json.dumps({"state": StepProgress.DONE}) == '{"state": "done"}'


def test_every_progress_state_has_a_row_and_done_leads_nowhere() -> None:
    assert set(PROGRESS_TRANSITIONS) == set(StepProgress)
    assert not PROGRESS_TRANSITIONS[StepProgress.DONE]


@pytest.mark.parametrize(("old", "new"), [
    (StepProgress.WAITING, StepProgress.RUNNING), (StepProgress.RUNNING, StepProgress.DONE),
    (StepProgress.WAITING, StepProgress.DONE)])  # no items; or reused whole by a retry
def test_allowed_progress_transitions(old: StepProgress, new: StepProgress) -> None:
    check_progress(old, new)


def test_forbidden_progress_transitions() -> None:
    allowed = {(StepProgress.WAITING, StepProgress.RUNNING),
               (StepProgress.RUNNING, StepProgress.DONE),
               (StepProgress.WAITING, StepProgress.DONE)}
    for old, new in itertools.product(StepProgress, StepProgress):
        if (old, new) in allowed:
            continue
        with pytest.raises(IllegalTransition, match=f"from {old} to {new}"):
            check_progress(old, new)


# -- the ledger -------------------------------------------------------------------------

def test_a_step_the_ledger_does_not_name_is_waiting() -> None:
    progress = Progress(None)
    assert progress.state("a") is StepProgress.WAITING
    assert [s.id for s in PLAN.steps if progress.ready(s)] == ["a"]
    assert progress.running(PLAN) == [] and progress.done(PLAN) == []
    assert not progress.all_done(PLAN)


def test_a_step_is_ready_once_every_step_it_waits_for_is_done() -> None:
    stored: dict[str, Any] = {"a": {"state": "done", "items": 1},
                              "b": {"state": "done", "items": 3},
                              "c": {"state": "running", "items": 2}}
    progress = Progress(stored)
    assert [s.id for s in PLAN.steps if progress.ready(s)] == []  # d waits for c
    assert progress.running(PLAN) == ["c"]
    assert [s.id for s in progress.done(PLAN)] == ["a", "b"]
    assert progress.items("b") == 3
    progress.finish("c")
    assert [s.id for s in PLAN.steps if progress.ready(s)] == ["d"]
    assert stored["c"]["state"] == "running"  # a copy: the row takes it at the end
    progress.start("d", 1)
    progress.finish("d")
    assert progress.all_done(PLAN)


def test_launching_writes_the_ledger_as_stored_before() -> None:
    progress = Progress({})
    assert progress.start("a", 5) is StepProgress.RUNNING
    assert progress.start("b", 0) is StepProgress.DONE  # a fan-out over nothing
    assert json.dumps(progress.steps) == json.dumps(
        {"a": {"state": "running", "items": 5}, "b": {"state": "done", "items": 0}})
    progress.finish("a")
    assert progress.steps["a"] == {"state": "done", "items": 5}


def test_a_launched_or_done_step_does_not_go_back() -> None:
    progress = Progress({"a": {"state": "running", "items": 2},
                         "b": {"state": "done", "items": 1}})
    with pytest.raises(IllegalTransition, match="from running to running"):
        progress.start("a", 2)
    with pytest.raises(IllegalTransition, match="from done to done"):
        progress.finish("b")
    with pytest.raises(IllegalTransition, match="from done to running"):
        progress.start("b", 1)


# -- settling ---------------------------------------------------------------------------

def test_a_step_with_no_failed_item_is_done() -> None:
    assert settle(step("a"), 1, 0, None) == Settled()


def test_abort_fails_the_run_at_the_first_failed_item() -> None:
    fan = step("f", fans_out=True)
    assert settle(fan, 10, 1, "exit 1") == Settled(error="exit 1")
    assert settle(step("a"), 1, 1, None) == Settled(error="failed")
    assert settle(fan, 10, 10, "exit 1") == Settled(
        error="every one of its 10 items failed; the first: exit 1")


@pytest.mark.parametrize("on_failure", [OnFailure.SKIP, OnFailure.CONTINUE])
def test_some_failed_items_of_a_fan_out_go_on(on_failure: OnFailure) -> None:
    fan = step("f", fans_out=True, on_failure=on_failure)
    assert settle(fan, 10, 3, "exit 1") == Settled(skip=on_failure is OnFailure.SKIP)
    # ...but not every one of them
    assert settle(fan, 10, 10, "boom").error == \
        "every one of its 10 items failed; the first: boom"


def test_a_lone_step_s_failure_fails_the_run_under_skip_not_under_continue() -> None:
    assert settle(step("a", on_failure=OnFailure.SKIP), 1, 1, "boom") == Settled(error="boom")
    assert settle(step("a", on_failure=OnFailure.CONTINUE), 1, 1, "boom") == Settled()


# -- batches ----------------------------------------------------------------------------

def test_items_go_one_a_message_without_history_or_batching() -> None:
    assert not may_batch(1, 200.0) and not may_batch(100, 0.0)
    assert may_batch(2, 200.0)
    assert batch_size(100, 200.0, None) == 1  # no history
    assert batch_size(1, 200.0, 1.0) == 1
    assert batch_size(100, 0.0, 1.0) == 1  # batching off
    assert batch_size(100, 200.0, 500.0) == 1  # slow: one item is more than a slice


def test_quick_items_fill_a_slice_of_work_a_message() -> None:
    assert batch_size(10, 200.0, 1.0) == 10  # one slice: one message
    assert batch_size(1000, 200.0, 1.0) == MAX_BATCH
    assert batch_size(1000, 200.0, 20.0) == 10  # 200 ms / 20 ms
    assert batch_size(30, 200.0, 10.0) == 15  # two slices: spread over two messages


# -- the watchdog -----------------------------------------------------------------------

def test_the_watchdog_is_armed_at_half_the_dead_time_or_when_a_retry_is_due() -> None:
    now = datetime(2025, 1, 1, tzinfo=UTC)
    half = now + timedelta(seconds=15)
    assert watch_at(now, 30.0, None, None) == half
    assert watch_at(now, 30.0, None, now + timedelta(seconds=5)) is None  # armed sooner
    assert watch_at(now, 30.0, None, now) == half  # armed, and past
    assert watch_at(now, 30.0, None, now + timedelta(seconds=20)) == half
    soon = now + timedelta(seconds=2)
    assert watch_at(now, 30.0, soon, now + timedelta(seconds=5)) == soon
    assert watch_at(now, 30.0, now - timedelta(seconds=1), None) == now  # overdue: now
