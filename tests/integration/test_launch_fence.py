"""A one-step run's message leaves before its launch commits (lifecycle/launch_fence.py):
the worker's claim waits for the commit behind the run's fence, a launch that rolls back
leaves its message nothing to run, and the wait is bounded."""

from __future__ import annotations

import contextlib
import os
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from conftest import RunResult, Stack, wait_until
from sqlalchemy import select, text
from sqlalchemy.exc import DBAPIError

from lifecycle import launch_fence, transitions
from lifecycle.canvas import dispatch_steps
from lifecycle.context import WorkerContext
from lifecycle.dispatch import Dispatch
from lifecycle.submit import create_run
from lifecycle.tasks import advance_in, send_ahead, send_outcome
from shared.db.models import PipelineRun, StepRun
from shared.db.session import transaction
from shared.plan import build_plan
from shared.settings import Settings
from shared.vault import load_vault

HOLD_S = 1.0  # the launch's transaction stays open this long after its message left


class _Abandoned(Exception):
    """Raised inside a launch's transaction: it rolls back."""


def _waiting_claims(url: str, run_id: str) -> int:
    """Sessions waiting for ``run_id``'s fence (a claim that came ahead of the commit)."""
    with transaction(url) as session:
        return int(session.execute(text(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
            "AND classid = :fence AND objid = hashtext(:run)::oid"),
            {"fence": launch_fence.FENCE_CLASS, "run": run_id}).scalar_one())


def _launch_held(stack: Stack, vault: Path, inputs: dict[str, Any], *,
                 abandon: bool = False, fence_after_s: float | None = None
                 ) -> tuple[str, int, datetime]:
    """Launch `token` as orchestrator/launch.py does, but keep the transaction open
    HOLD_S after the message went ahead (``abandon``: then roll it back;
    ``fence_after_s``: take the fence that long after the message left, as a lock
    overtaken by its message would be). The run's id, the most claims seen waiting on
    its fence meanwhile, and when the hold ended."""
    url = stack.endpoints.database_url
    ctx = WorkerContext(settings=Settings(_env_file=None, home=stack.home, vault=vault,
                                          database_url=url),
                        database_url=url, vault=vault, hostname="test", pid=os.getpid())
    loaded = load_vault(vault)
    skill = loaded.get("token")
    plan = build_plan(skill, loaded.skills, inputs)
    run_id, waiting = "", 0
    with pytest.raises(_Abandoned) if abandon else contextlib.nullcontext():
        with transaction(url) as session:
            run_id = create_run(session, loaded, skill, inputs, source="production",
                                triggered_by="test", plan=plan)
            out = advance_in(session, ctx, run_id)
            if fence_after_s is None:
                left = send_ahead(stack.app, session, run_id, out)
            else:
                dispatch_steps(stack.app, out.dispatch)
                time.sleep(fence_after_s)
                with launch_fence.hold(session, run_id):
                    left = replace(out, dispatch=[])
            assert left.dispatch == [], "a one-step launch's message did not go ahead"
            deadline = time.monotonic() + HOLD_S
            while time.monotonic() < deadline:
                waiting = max(waiting, _waiting_claims(url, run_id))
                time.sleep(0.05)
            released = datetime.now(UTC)
            if abandon:
                raise _Abandoned
        send_outcome(stack.app, ctx, run_id, left)
    return run_id, waiting, released


def test_a_claim_that_comes_ahead_of_its_launch_s_commit_waits_for_it(
        healthy: Stack, vault: Path) -> None:
    run_id, waiting, released = _launch_held(healthy, vault, {"key": uuid.uuid4().hex})
    # The worker had the message during the hold and waited on the fence, not on a
    # message still on its way.
    assert waiting == 1, f"no claim waited on {run_id}'s fence while its launch was open"
    _claimed_once_after(healthy, run_id, released)


def _claimed_once_after(stack: Stack, run_id: str, released: datetime) -> None:
    """The run succeeded with one attempt, claimed only after its launch's hold ended."""
    run = stack.wait_run(run_id)
    assert run.state == "succeeded", run.error
    steps = stack.steps(run_id)
    assert [(s.attempt, s.state) for s in steps] == [(1, "succeeded")]
    assert steps[0].started_at is not None and steps[0].started_at >= released


def test_a_claim_that_comes_ahead_of_its_launch_s_lock_waits_for_it(
        healthy: Stack, vault: Path) -> None:
    """The lock's statement leaves before the message and is answered after: should the
    message win that race, its claim finds the fence free and the run unknown, and waits
    for either to show rather than dropping the message."""
    run_id, waiting, released = _launch_held(healthy, vault, {"key": uuid.uuid4().hex},
                                             fence_after_s=launch_fence.UNSEEN_WAIT_S / 3)
    assert waiting == 1, f"the claim of {run_id} did not wait for its late fence"
    _claimed_once_after(healthy, run_id, released)


def test_a_launch_that_rolls_back_leaves_its_message_nothing_to_run(
        healthy: Stack, vault: Path, run_skill: Callable[..., RunResult]) -> None:
    run_id, waiting, _ = _launch_held(healthy, vault, {"key": uuid.uuid4().hex},
                                      abandon=True)
    assert waiting == 1, f"no claim waited on {run_id}'s fence while its launch was open"
    # The claim found no row once the fence was free, and dropped the message.
    wait_until(lambda: _waiting_claims(healthy.endpoints.database_url, run_id) == 0, 10,
               "the claim to stop waiting")
    with healthy.db() as session:
        assert session.get(PipelineRun, run_id) is None
        assert session.scalars(select(StepRun).where(StepRun.run_id == run_id)).first() is None
    after = run_skill("token", vault, "--json", inputs={"key": uuid.uuid4().hex})
    assert after.code == 0, after  # the worker that waited serves the next run


def test_waiting_for_a_fence_is_bounded(healthy: Stack) -> None:
    url, run_id = healthy.endpoints.database_url, f"fence-{uuid.uuid4().hex}"
    held, release = threading.Event(), threading.Event()

    def launch() -> None:
        with transaction(url) as session:
            with launch_fence.hold(session, run_id):
                pass
            held.set()
            release.wait(30)

    holder = threading.Thread(target=launch)
    holder.start()
    try:
        assert held.wait(10)
        started = time.monotonic()
        assert launch_fence.wait_open(url, run_id, wait_s=0.3) is False
        assert time.monotonic() - started >= 0.3
        # The claim's own wait, first in its pipeline, is bounded the same way.
        started = time.monotonic()
        with pytest.raises(DBAPIError) as raised, transaction(url) as session:
            transitions.claim_lone(session, f"{run_id}/main/-1/1", worker="w", pid=1,
                                   daemon=None, fence_wait_s=0.3)
        assert launch_fence.timed_out(raised.value), raised.value
        assert time.monotonic() - started >= 0.3
    finally:
        release.set()
        holder.join(30)
    assert launch_fence.wait_open(url, run_id, wait_s=5) is True


def test_a_claim_s_fence_bound_ends_with_its_wait(healthy: Stack) -> None:
    """The rest of the claim's transaction (its cache hit recorded, its run planned)
    waits for its row locks as any transaction does, not under the fence's bound."""
    url = healthy.endpoints.database_url
    with transaction(url) as session:
        before = session.execute(text("SHOW lock_timeout")).scalar_one()
        lone = transitions.claim_lone(session, f"fence-{uuid.uuid4().hex}/main/-1/1",
                                      worker="w", pid=1, daemon=None)
        assert (lone.claimed, lone.run, lone.run_known) == (None, None, False)
        assert session.execute(text("SHOW lock_timeout")).scalar_one() == before
    # What the transaction had set is what it gets back, not the server's default.
    with transaction(url) as session:
        session.execute(text("SET LOCAL lock_timeout = '7s'"))
        transitions.claim_lone(session, f"fence-{uuid.uuid4().hex}/main/-1/1",
                               worker="w", pid=1, daemon=None)
        assert session.execute(text("SHOW lock_timeout")).scalar_one() == "7s"


def test_a_claim_knows_whether_a_launch_held_its_fence(healthy: Stack) -> None:
    """Unknown with the fence free, the run may yet come (its lock behind its message);
    unknown once a launch let go of the fence, that launch rolled back."""
    url, run_id = healthy.endpoints.database_url, f"fence-{uuid.uuid4().hex}"
    row_id = f"{run_id}/main/-1/1"
    with transaction(url) as session:
        lone = transitions.claim_lone(session, row_id, worker="w", pid=1, daemon=None)
    assert (lone.claimed, lone.fence_free, lone.run_known) == (None, True, False)

    held, release, claims = threading.Event(), threading.Event(), []

    def launch() -> None:
        with contextlib.suppress(_Abandoned), transaction(url) as session:
            with launch_fence.hold(session, run_id):
                pass
            held.set()
            release.wait(30)
            raise _Abandoned

    def claim() -> None:
        with transaction(url) as session:
            claims.append(transitions.claim_lone(session, row_id, worker="w", pid=1,
                                                 daemon=None))

    holder, claimer = threading.Thread(target=launch), threading.Thread(target=claim)
    holder.start()
    try:
        assert held.wait(10)
        claimer.start()
        wait_until(lambda: _waiting_claims(url, run_id) == 1, 10,
                   "the claim to wait on the fence")
    finally:
        release.set()
        holder.join(30)
        claimer.join(30)
    assert [(c.claimed, c.fence_free, c.run_known) for c in claims] == [(None, False, False)]


def test_only_one_lone_first_attempt_goes_ahead_of_its_commit() -> None:
    def one(*ids: str) -> list[Dispatch]:
        return [Dispatch(step_run_ids=ids, queue="default")]

    assert launch_fence.goes_ahead(one("r/main/-1/1"))
    assert not launch_fence.goes_ahead(one("r/main/-1/2"))  # a retry: claimed as a batch
    assert not launch_fence.goes_ahead(one("r/each/0/1"))  # an item of a fan-out
    assert not launch_fence.goes_ahead(one("r/each/0/1", "r/each/1/1"))
    assert not launch_fence.goes_ahead(one("r/a/-1/1") + one("r/b/-1/1"))
    assert not launch_fence.goes_ahead([])
