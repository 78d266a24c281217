"""The planner on a wide fan-out, driven by hand against the stack's PostgreSQL.

Each advance reads only what it needs (lifecycle/planner.py); these check that what it
decides is still right at a width where COPY writes the rows: every item launched once,
redelivered claims and finishes counted once, retries and losses given exactly one next
attempt, failures skipped, cancellation counted, and the per-step counts a waiting
client reads (lifecycle/step_counts.py) equal to a count of the newest attempts.

Nothing is sent to a queue: the test plays the workers with lifecycle/transitions/,
and clears each run's watch time so the workers' sweep leaves its runs alone.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from conftest import DEAD_AFTER_S, Stack
from sqlalchemy import select, update

from lifecycle import transitions
from lifecycle.planner import MAX_LOST, Outcome, advance
from lifecycle.step_counts import any_open, open_items, state_counts
from lifecycle.submit import create_run
from orchestrator.history import latest_states
from shared.db.models import PipelineRun, StepCount, StepRun
from shared.settings import Settings
from shared.store import unpack
from shared.vault import Vault, load_vault

pytestmark = pytest.mark.integration

WIDE = 3000  # past transitions.COPY_FROM many times over: the launch goes by COPY
WORKER, OTHER = 4_100_001, 4_100_002  # pids no process has: two deliveries' workers

LEAF = """---
name: scale-leaf
description: "Return n. A stand-in step the test itself plays the worker of."
version: 1
inputs:
  - name: n
    type: integer
    required: true
    description: "A number."
outputs:
  - name: n
    type: integer
    description: "The same number."
approach: code
run:
  command: "true"
  timeout: 30
  retries: 0
---
# scale-leaf

Returns n.
"""

FAN = """---
name: {name}
description: "Fan scale-leaf out over items. A wide fan-out for the planner tests."
version: 1
inputs:
  - name: items
    type: integer[]
    required: true
    description: "Items."
outputs:
  - name: ns
    type: integer[]
    description: Mapped from a step.
    from: ${{steps.each.outputs.n}}
steps:
  - id: each
    skill: scale-leaf
    for_each: ${{inputs.items}}
    with:
      n: ${{item}}
    on_failure: {on_failure}
---
# {name}

Fans scale-leaf out.
"""


@pytest.fixture
def scale_vault(tmp_path: Path) -> Vault:
    root = tmp_path / "vault"
    (root / "scale-leaf").mkdir(parents=True)
    (root / "scale-leaf" / "SKILL.md").write_text(LEAF)
    for name, on_failure in (("scale-fan", "abort"), ("scale-skip", "skip")):
        (root / name).mkdir()
        (root / name / "SKILL.md").write_text(FAN.format(name=name, on_failure=on_failure))
    vault = load_vault(root)
    assert not vault.problems, vault.problems
    return vault


@pytest.fixture
def settings(stack: Stack) -> Settings:
    return Settings(_env_file=None, home=stack.home, dead_after_s=DEAD_AFTER_S)


class Driver:
    """One run of a wide fan-out, moved on by hand."""

    def __init__(self, stack: Stack, settings: Settings, vault: Vault, skill: str,
                 width: int) -> None:
        self.stack, self.settings = stack, settings
        with stack.db() as session:
            self.run_id = create_run(session, vault, vault.get(skill),
                                     {"items": list(range(width))}, source="test",
                                     triggered_by="test_planner_scale")

    def ids(self, items: Sequence[int], attempt: int = 1) -> list[str]:
        return [f"{self.run_id}/each/{i}/{attempt}" for i in items]

    def advance(self) -> Outcome:
        with self.stack.db() as session:
            out = advance(session, self.run_id, self.settings)
            self._unwatched(session)
        return out

    def advance_with_stale_heartbeat(self, row_ids: Sequence[str]) -> Outcome:
        """An advance that finds these attempts' heartbeats long stopped (set in the same
        transaction, so the workers' sweep never sees them first)."""
        stale = datetime.now(UTC) - timedelta(seconds=10 * DEAD_AFTER_S)
        with self.stack.db() as session:
            session.execute(update(StepRun).where(StepRun.id.in_(list(row_ids)))
                            .values(heartbeat_at=stale))
            out = advance(session, self.run_id, self.settings)
            self._unwatched(session)
        return out

    def _unwatched(self, session: Any) -> None:
        session.execute(update(PipelineRun).where(PipelineRun.id == self.run_id)
                        .values(watch_at=None))

    def claim(self, ids: Sequence[str], pid: int = WORKER) -> set[str]:
        with self.stack.db() as session:
            return set(transitions.claim_pending(session, ids, worker="test@h", pid=pid,
                                                 daemon=None, now=alive()))

    def finish(self, ids: Sequence[str], state: str, pid: int = WORKER) -> int:
        """Record each attempt as its worker would: outputs {n} when it succeeded."""
        recorded = 0
        with self.stack.db() as session:
            for row_id in ids:
                n = int(row_id.split("/")[2])
                done = transitions.finish_attempt(session, {
                    "id": row_id, "state": state,
                    "outputs": {"n": n} if state == "succeeded" else None,
                    "error": None if state == "succeeded" else f"item {n} {state}",
                    "error_kind": None if state == "succeeded" else "exit",
                    "cache_hit": False, "exit_code": 0 if state == "succeeded" else 1,
                    "stdout_tail": "", "stderr_tail": "", "now": datetime.now(UTC),
                    "duration_ms": 1.0, "not_before": None}, pid=pid)
                recorded += done is not None
        return recorded

    def counts(self) -> dict[str, int]:
        """The kept counts, checked against a count of every item's newest attempt."""
        with self.stack.db() as session:
            kept = state_counts(session, [self.run_id])
            assert kept == latest_states(session, [self.run_id])
        return kept

    def run(self) -> PipelineRun:
        return self.stack.run(self.run_id)

    def open(self) -> int:
        with self.stack.db() as session:
            return open_items(session, self.run_id, "each")


@pytest.fixture
def drive(stack: Stack, settings: Settings, scale_vault: Vault) -> Iterator[Any]:
    made: list[Driver] = []

    def make(skill: str = "scale-fan", width: int = WIDE) -> Driver:
        made.append(Driver(stack, settings, scale_vault, skill, width))
        return made[-1]

    yield make
    with stack.db() as session:  # nothing left open for the workers' sweep to find
        for d in made:
            transitions.cancel_run(session, d.run_id, "test over")


def alive() -> datetime:
    """A claim's time (and so its heartbeat's) that the workers' sweep takes for a live
    worker's however long a test takes: it never advances these runs behind its back."""
    return datetime.now(UTC) + timedelta(hours=1)


def sent(out: Outcome) -> list[str]:
    return [i for d in out.dispatch for i in d.step_run_ids]


def test_a_wide_fan_out_is_launched_once_and_an_idle_advance_sends_nothing(drive: Any) -> None:
    d = drive()
    out = d.advance()
    assert sorted(sent(out)) == sorted(d.ids(range(WIDE)))
    assert d.counts() == {"pending": WIDE}
    for _ in range(2):  # idempotent: nothing new, however often it is asked
        again = d.advance()
        assert (again.dispatch, again.finished) == ([], False)
    assert d.run().progress["each"] == {"state": "running", "items": WIDE}


def test_redelivered_claims_and_finishes_count_once(drive: Any, stack: Stack) -> None:
    d = drive()
    d.advance()
    half, rest = range(WIDE // 2), range(WIDE // 2, WIDE)
    assert d.claim(d.ids(half)) == set(d.ids(half))
    assert d.claim(d.ids(half), pid=OTHER) == set()  # a second delivery claims nothing
    assert d.finish(d.ids(half), "succeeded") == len(half)
    assert d.finish(d.ids(half), "succeeded") == 0  # a redelivered finish: not recorded
    assert d.finish(d.ids(half), "failed", pid=OTHER) == 0
    assert d.counts() == {"succeeded": len(half), "pending": len(rest)}
    assert d.open() == 1
    assert not d.advance().finished  # half-way: nothing to do yet
    d.claim(d.ids(rest))
    assert d.counts() == {"succeeded": len(half), "running": len(rest)}
    d.finish(d.ids(rest), "succeeded")
    assert d.open() == 0
    out = d.advance()
    assert out.finished and not out.dispatch
    run = d.run()
    assert run.state == "succeeded"
    with stack.db() as session:
        assert unpack(session, run.outputs) == {"ns": list(range(WIDE))}  # in item order
    assert d.counts() == {"succeeded": WIDE}
    assert d.advance() == Outcome()  # ended: a late nudge changes nothing


def test_retries_and_losses_get_one_next_attempt_each(drive: Any, stack: Stack) -> None:
    d = drive()
    d.advance()
    flaky = list(range(10))
    d.claim(d.ids(flaky))
    d.finish(d.ids(flaky), "retrying")
    out = d.advance()
    assert sorted(sent(out)) == sorted(d.ids(flaky, attempt=2))
    assert all(x.urgent for x in out.dispatch)  # a retry goes ahead of the backlog
    assert d.advance().dispatch == []  # followed already: no third attempt
    assert d.counts() == {"pending": WIDE}  # the retrying attempts are not the newest
    with stack.db() as session:
        superseded = session.scalars(select(StepRun.superseded).where(
            StepRun.id.in_(d.ids(flaky)))).all()
    assert superseded == [True] * len(flaky)

    # Item 0's worker dies while it runs: its heartbeat stops, twice; then its pool
    # child dies running it (declared lost by the worker): the third loss fails the run.
    for attempt in (2, 3):
        d.claim(d.ids([0], attempt))
        out = d.advance_with_stale_heartbeat(d.ids([0], attempt))
        assert sent(out) == d.ids([0], attempt + 1)
        assert d.counts() == {"pending": WIDE}
    d.claim(d.ids([0], attempt=4))
    with stack.db() as session:
        transitions.lose_process(session, d.ids([0], attempt=4), WORKER, "pool child died")
    assert d.counts() == {"pending": WIDE - 1, "lost": 1}
    out = d.advance()
    assert out.finished and MAX_LOST == 3
    run = d.run()
    assert (run.state, run.failed_step, run.failed_item) == ("failed", "each", 0)
    assert d.counts() == {"lost": 1, "cancelled": WIDE - 1}


def test_a_dead_worker_s_batches_are_each_item_redispatched_once(drive: Any) -> None:
    d = drive()
    d.advance()
    held = list(range(100, 356))  # four batches of 64, claimed by a worker that then dies
    d.claim(d.ids(held))
    out = d.advance_with_stale_heartbeat(d.ids(held))
    assert sorted(sent(out)) == sorted(d.ids(held, attempt=2))
    assert d.counts() == {"pending": WIDE}
    assert d.advance().dispatch == []
    d.claim(d.ids(range(WIDE)) + d.ids(held, attempt=2))  # the rest, and the second tries
    d.finish([i for n, i in enumerate(d.ids(range(WIDE))) if n not in set(held)],
             "succeeded")
    d.finish(d.ids(held, attempt=2), "succeeded")
    assert d.advance().finished and d.run().state == "succeeded"
    assert d.counts() == {"succeeded": WIDE}


def test_failed_items_are_skipped_in_one_statement_and_the_rest_kept(drive: Any,
                                                                      stack: Stack) -> None:
    d = drive("scale-skip")
    d.advance()
    failing = set(range(0, WIDE, 7))
    ids = d.ids(range(WIDE))
    d.claim(ids)
    d.finish([i for n, i in enumerate(ids) if n in failing], "failed")
    d.finish([i for n, i in enumerate(ids) if n not in failing], "succeeded")
    out = d.advance()
    assert out.finished and d.run().state == "succeeded"
    with stack.db() as session:
        assert unpack(session, d.run().outputs) == {
            "ns": [n for n in range(WIDE) if n not in failing]}
    assert d.counts() == {"skipped": len(failing), "succeeded": WIDE - len(failing)}


def test_every_item_failing_fails_the_run_naming_the_first(drive: Any) -> None:
    d = drive("scale-skip", width=200)
    d.advance()
    ids = d.ids(range(200))
    d.claim(ids)
    d.finish(list(reversed(ids)), "failed")
    assert d.advance().finished
    run = d.run()
    assert (run.state, run.failed_item) == ("failed", 0)
    assert run.error is not None and "every one of its 200 items failed" in run.error


def test_cancelling_a_wide_fan_out_counts_every_item_once(drive: Any, stack: Stack) -> None:
    d = drive()
    d.advance()
    d.claim(d.ids(range(100)))
    d.finish(d.ids(range(50)), "succeeded")
    with stack.db() as session:
        stopped = transitions.cancel_run(session, d.run_id, "cancelled by the test")
    assert sorted(stopped) == sorted(d.ids(range(50, 100)))
    assert d.counts() == {"succeeded": 50, "cancelled": WIDE - 50}
    assert d.advance() == Outcome()
    assert d.finish(d.ids(range(50, 100)), "succeeded") == 0  # too late: cancelled


def test_a_rolled_back_savepoint_takes_its_counts_with_it(drive: Any, stack: Stack) -> None:
    d = drive(width=100)
    d.advance()
    with stack.db() as session:
        transitions.claim_pending(session, d.ids(range(10)), worker="test@h", pid=WORKER,
                                  daemon=None, now=alive())
        savepoint = session.begin_nested()
        transitions.claim_pending(session, d.ids(range(10, 30)), worker="test@h",
                                  pid=WORKER, daemon=None, now=alive())
        savepoint.rollback()
        assert any_open(session, d.run_id, "each")
    assert d.counts() == {"running": 10, "pending": 90}


def test_counts_are_written_once_per_transaction_at_its_commit(drive: Any,
                                                               stack: Stack) -> None:
    """A transaction's count changes are one statement at its commit (so their row
    locks are its last): nothing of them is written before."""
    d = drive(width=100)
    d.advance()
    with stack.db() as session:
        transitions.claim_pending(session, d.ids(range(5)), worker="test@h", pid=WORKER,
                                  daemon=None, now=alive())
        assert session.scalar(select(StepCount.items).where(
            StepCount.run_id == d.run_id, StepCount.state == "running")) is None
        with stack.db() as other:  # another transaction: the committed counts only
            assert state_counts(other, [d.run_id]) == {"pending": 100}
    assert d.counts() == {"pending": 95, "running": 5}
