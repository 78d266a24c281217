"""Run states as string enums with explicit transitions (the dashboard queries these).

    pipeline: pending -> running -> succeeded | failed | cancelled | rejected
              (rejected: a person turned an approval step down, and it aborted the run)
    step:     pending -> running -> succeeded | failed | retrying | lost | cancelled
              pending -> cancelled (never started: its run ended or was cancelled)
              running -> waiting -> pending (an agent step waits for the runs its
              execute_skill calls started, or for a person's answer; an approval step
              for a person's decision: holding no worker slot, then it runs again)
              failed -> skipped (the planner drops a failed item under on_failure: skip)
              retrying and lost are terminal for that attempt: a new attempt row follows
    progress: waiting -> running -> done (a step as its run's ledger has it)
              waiting -> done (a fan-out over nothing; a step `skillq retry` reuses whole)
    wait:     open -> answered (a question) | approved | rejected (an approval)
              open -> timed_out (past its deadline) | cancelled (its run ended first)
    build:    planning -> proposed -> building -> built | failed (a skill build's stage)
              proposed -> planning (a revision) | rejected; any but an end -> cancelled

Only lifecycle/transitions/ writes the run and step states; every write there is checked
against the tables below, and its SQL guards are built from them (``sources``). A step's
progress is the planner's ledger on the run's row (``pipeline_runs.progress``: {step id:
{"state": ..., "items": n}}), written by lifecycle/planner/ and lifecycle/retry.py, each
change checked against PROGRESS_TRANSITIONS (``check_progress``). A wait for a person
(``waits``) changes only in lifecycle/transitions/waits.py, checked against
WAIT_TRANSITIONS (``check_wait``). A skill build's stage (``builds``) changes only in
lifecycle/builds.py, checked against BUILD_TRANSITIONS (``check_build``).
"""

from __future__ import annotations

from enum import StrEnum

from shared.errors import IllegalTransition


class RunState(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    REJECTED = "rejected"  # an approval step turned down, its on_failure abort

    @property
    def terminal(self) -> bool:
        return self in (RunState.SUCCEEDED, RunState.FAILED, RunState.CANCELLED,
                        RunState.REJECTED)


class StepState(StrEnum):
    PENDING = "pending"  # dispatched, waiting in its queue
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"  # permanent for this step (after retries)
    SKIPPED = "skipped"  # failed, and on_failure: skip dropped the item
    RETRYING = "retrying"  # transient failure; the next attempt is scheduled
    LOST = "lost"  # its worker died; the next attempt was dispatched
    CANCELLED = "cancelled"  # never ran, or was stopped: its run ended or was cancelled
    WAITING = "waiting"  # waiting on the sub-skill runs it started, or on a person

    @property
    def terminal(self) -> bool:
        return self not in (StepState.PENDING, StepState.RUNNING, StepState.WAITING)

    @property
    def final(self) -> bool:
        """Terminal with no further attempt coming."""
        return self in (StepState.SUCCEEDED, StepState.FAILED, StepState.SKIPPED,
                        StepState.CANCELLED)


# The error_kind of an approval step a person (or its timeout) turned down: under
# on_failure abort its run ends REJECTED rather than FAILED.
REJECTED_KIND = "rejected"


class StepProgress(StrEnum):
    """A step of a run as the planner's ledger has it (not an attempt's state: StepState).
    The values are what ``pipeline_runs.progress`` stores."""

    WAITING = "waiting"  # not launched (a step the ledger does not name is waiting)
    RUNNING = "running"  # its items launched, not every one final yet
    DONE = "done"  # every item final, the run not failed by them


class WaitState(StrEnum):
    """A question or an approval waiting for a person (shared/db/wait_models.py)."""

    OPEN = "open"
    ANSWERED = "answered"  # a question's answer
    APPROVED = "approved"
    REJECTED = "rejected"
    TIMED_OUT = "timed_out"  # nobody decided by its deadline (the default, if any, holds)
    CANCELLED = "cancelled"  # its run ended first

    @property
    def decided(self) -> bool:
        return self is not WaitState.OPEN


class BuildStage(StrEnum):
    """Where a skill build is (shared/db/build_models.py): its plan, then its drafts."""

    PLANNING = "planning"  # the planner agent writes (or revises) the plan
    PROPOSED = "proposed"  # the plan waits for a person: approve, revise or reject
    BUILDING = "building"  # approved: builder agents write and test the drafts
    BUILT = "built"  # every draft it could build is in the artifact store
    FAILED = "failed"
    REJECTED = "rejected"
    CANCELLED = "cancelled"

    @property
    def ended(self) -> bool:
        return not BUILD_TRANSITIONS[self]


RUN_TRANSITIONS: dict[RunState, frozenset[RunState]] = {
    RunState.PENDING: frozenset({RunState.RUNNING, RunState.FAILED, RunState.CANCELLED}),
    RunState.RUNNING: frozenset({RunState.SUCCEEDED, RunState.FAILED, RunState.CANCELLED,
                                 RunState.REJECTED}),
    RunState.SUCCEEDED: frozenset(),
    RunState.FAILED: frozenset(),
    RunState.CANCELLED: frozenset(),
    RunState.REJECTED: frozenset(),
}

WAIT_TRANSITIONS: dict[WaitState, frozenset[WaitState]] = {
    WaitState.OPEN: frozenset({WaitState.ANSWERED, WaitState.APPROVED, WaitState.REJECTED,
                               WaitState.TIMED_OUT, WaitState.CANCELLED}),
    **{s: frozenset() for s in WaitState if s is not WaitState.OPEN},
}

_BUILD_END = (BuildStage.FAILED, BuildStage.CANCELLED)
BUILD_TRANSITIONS: dict[BuildStage, frozenset[BuildStage]] = {
    BuildStage.PLANNING: frozenset({BuildStage.PROPOSED, *_BUILD_END}),
    BuildStage.PROPOSED: frozenset({BuildStage.PLANNING, BuildStage.BUILDING,
                                    BuildStage.REJECTED, *_BUILD_END}),
    BuildStage.BUILDING: frozenset({BuildStage.BUILT, *_BUILD_END}),
    BuildStage.BUILT: frozenset(),
    BuildStage.FAILED: frozenset(),
    BuildStage.REJECTED: frozenset(),
    BuildStage.CANCELLED: frozenset(),
}

STEP_TRANSITIONS: dict[StepState, frozenset[StepState]] = {
    StepState.PENDING: frozenset({StepState.RUNNING, StepState.CANCELLED}),
    # Not running -> running: an attempt whose process died is lost, and a new attempt
    # follows (one place decides retries); one its nested run carries stays with it.
    StepState.RUNNING: frozenset({StepState.SUCCEEDED, StepState.FAILED, StepState.RETRYING,
                                  StepState.LOST, StepState.CANCELLED, StepState.WAITING}),
    StepState.SUCCEEDED: frozenset(),
    StepState.FAILED: frozenset({StepState.SKIPPED}),
    StepState.SKIPPED: frozenset(),
    StepState.RETRYING: frozenset(),
    StepState.LOST: frozenset(),
    StepState.CANCELLED: frozenset(),
    StepState.WAITING: frozenset({StepState.PENDING, StepState.CANCELLED}),
}


PROGRESS_TRANSITIONS: dict[StepProgress, frozenset[StepProgress]] = {
    # Waiting -> done: a fan-out over nothing (no item to run), or a step whose every
    # item a retry's run reuses, which starts done (lifecycle/retry.py).
    StepProgress.WAITING: frozenset({StepProgress.RUNNING, StepProgress.DONE}),
    StepProgress.RUNNING: frozenset({StepProgress.DONE}),
    StepProgress.DONE: frozenset(),
}


def run_sources(new: RunState) -> tuple[RunState, ...]:
    """The states a run may enter ``new`` from, in declaration order."""
    return tuple(s for s in RunState if new in RUN_TRANSITIONS[s])


def step_sources(new: StepState) -> tuple[StepState, ...]:
    """The states a step attempt may enter ``new`` from, in declaration order."""
    return tuple(s for s in StepState if new in STEP_TRANSITIONS[s])


def check_run(old: RunState, new: RunState) -> None:
    if new not in RUN_TRANSITIONS[old]:
        raise IllegalTransition(f"pipeline run cannot go from {old} to {new}")


def check_step(old: StepState, new: StepState) -> None:
    if new not in STEP_TRANSITIONS[old]:
        raise IllegalTransition(f"step run cannot go from {old} to {new}")


def check_wait(old: WaitState, new: WaitState) -> None:
    if new not in WAIT_TRANSITIONS[old]:
        raise IllegalTransition(f"a wait cannot go from {old} to {new}")


def check_build(old: BuildStage, new: BuildStage) -> None:
    if new not in BUILD_TRANSITIONS[old]:
        raise IllegalTransition(f"a build cannot go from {old} to {new}")


def check_progress(old: StepProgress, new: StepProgress) -> None:
    if new not in PROGRESS_TRANSITIONS[old]:
        raise IllegalTransition(f"step progress cannot go from {old} to {new}")
