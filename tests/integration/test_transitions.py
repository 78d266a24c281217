"""The one writer of run and step states (lifecycle/transitions/), against PostgreSQL.

Each lifecycle function is called on real rows in the stack's database, in a transaction
the test owns (the caller owns the transaction), and the rows are read back.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from conftest import Stack
from sqlalchemy.orm import Session

from lifecycle import transitions
from shared import cache
from shared.db.models import CacheEntry, PipelineRun, StepRun
from shared.db.session import engine_for
from shared.errors import IllegalTransition

pytestmark = pytest.mark.integration
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def db(stack: Stack) -> Iterator[Session]:
    """A session in a transaction that is rolled back: nothing is left for other tests."""
    with engine_for(stack.endpoints.database_url).connect() as conn:
        outer = conn.begin()
        with Session(conn) as session:
            yield session
        outer.rollback()


def a_run(session: Session, parent: str | None = None) -> PipelineRun:
    run = transitions.new_run(
        session, run_id=f"run-t{uuid.uuid4().hex[:14]}", skill="transitions-probe", version=1,
        source="production", vault="/nowhere", plan={"steps": [], "workdir": "/tmp/w"},
        inputs={"text": "x"}, triggered_by="test", parent_step_run_id=parent)
    session.flush()
    return run


def attempts(run: PipelineRun, n: int, step: str = "s") -> list[dict[str, Any]]:
    return [{"id": f"{run.id}/{step}/{i}/1", "run_id": run.id, "step_id": step,
             "item_index": i, "attempt": 1, "skill": "transitions-probe", "version": 1,
             "state": "pending", "source": "production", "queue": "default",
             "inputs": {"text": str(i)}, "input_hash": "h", "not_before": None,
             "route": "test"} for i in range(n)]


def rows(session: Session, run: PipelineRun) -> list[StepRun]:
    session.expire_all()
    return sorted(session.query(StepRun).filter_by(run_id=run.id).all(),
                  key=lambda r: (r.step_id, r.item_index, r.attempt))


def claim(session: Session, ids: list[str], pid: int = 4242) -> dict[str, Any]:
    return transitions.claim_pending(session, ids, worker="w@h", pid=pid, daemon="d",
                                     now=NOW)


def test_a_run_starts_pending_then_runs_then_succeeds(db: Session) -> None:
    run = a_run(db)
    assert run.state == "pending" and run.input_hash
    transitions.start_run(run, NOW)
    assert (run.state, run.started_at) == ("running", NOW)
    transitions.succeed_run(run, {"text": "y"}, NOW)
    assert (run.state, run.outputs, run.finished_at) == ("succeeded", {"text": "y"}, NOW)
    with pytest.raises(IllegalTransition):
        transitions.fail_run(db, run, error="late", step="s", item=None)
    assert run.state == "succeeded"


def test_launch_inserts_pending_attempts_by_insert_and_by_copy(db: Session) -> None:
    small, wide = a_run(db), a_run(db)
    transitions.launch_attempts(db, attempts(small, 3))
    transitions.launch_attempts(db, attempts(wide, transitions.COPY_FROM + 6))
    assert [r.state for r in rows(db, small)] == ["pending"] * 3
    found = rows(db, wide)
    assert len(found) == transitions.COPY_FROM + 6
    assert {r.state for r in found} == {"pending"} and found[5].inputs == {"text": "5"}
    with pytest.raises(ValueError, match="starts pending"):
        transitions.launch_attempts(db, [{**attempts(small, 1)[0], "state": "running"}])


def test_claim_takes_pending_attempts_once_and_none_of_an_ended_run(db: Session) -> None:
    run = a_run(db)
    transitions.launch_attempts(db, attempts(run, 2))
    ids = [f"{run.id}/s/0/1", f"{run.id}/s/1/1"]
    got = claim(db, ids)
    assert set(got) == set(ids) and got[ids[0]].workdir == "/tmp/w"
    assert claim(db, ids) == {}  # a second delivery claims nothing
    assert {(r.state, r.worker_pid, r.daemon) for r in rows(db, run)} == {
        ("running", 4242, "d")}
    ended = a_run(db)
    transitions.launch_attempts(db, attempts(ended, 1))
    transitions.fail_run(db, ended, error="boom", step="s", item=None, now=NOW)
    assert claim(db, [f"{ended.id}/s/0/1"]) == {}


def test_a_claim_finds_the_cache_entry_of_the_inputs_its_planner_stored(
        db: Session) -> None:
    """The claim answers a cache-enabled attempt's lookup in its own round trip: its
    row's key (cache.key_sql over skill, version and input hash) is the key the worker
    computes (cache.cache_key), so the worker can take the entry found, or its absence,
    as its lookup's answer. Live entries only; any text in the inputs."""
    run = a_run(db)
    given = [{"text": "hit"}, {"text": "miss"}, {"text": "expired"},
             {"text": "ü ß\n\t'\"%(x)s :y"}, {"text": "lone"}]
    made = [{**row, "inputs": inputs, "input_hash": cache.input_hash(inputs)}
            for row, inputs in zip(attempts(run, 4), given, strict=False)]
    lone = {**made[0], "id": f"{run.id}/l/-1/1", "step_id": "l", "item_index": -1,
            "inputs": given[4], "input_hash": cache.input_hash(given[4])}
    transitions.launch_attempts(db, [*made, lone])
    hour = timedelta(hours=1)
    # claim() claims at NOW, claim_lone on the worker's clock
    for inputs, expires_at in ((given[0], NOW + hour), (given[2], NOW - hour),
                               (given[3], NOW + hour), (given[4], datetime.now(UTC) + hour)):
        db.add(CacheEntry(key=cache.cache_key("transitions-probe", 1, inputs),
                          skill="transitions-probe", version=1,
                          outputs={"echo": inputs["text"]}, step_run_id="earlier",
                          expires_at=expires_at))
    db.flush()

    got = claim(db, [row["id"] for row in made])
    assert {i: c.cache_key for i, c in got.items()} == {
        row["id"]: cache.cache_key("transitions-probe", 1, row["inputs"]) for row in made}
    assert [got[row["id"]].cache_found for row in made] == [
        [{"echo": "hit"}], None, None, [{"echo": given[3]["text"]}]]
    claimed = transitions.claim_lone(db, lone["id"], worker="w@h", pid=4242,
                                     daemon="d").claimed
    assert claimed is not None
    assert claimed.cache_key == cache.cache_key("transitions-probe", 1, given[4])
    assert claimed.cache_found == [{"echo": "lone"}]


def test_finish_records_only_the_claiming_process_s_attempt(db: Session) -> None:
    run = a_run(db)
    transitions.launch_attempts(db, attempts(run, 1))
    row_id = f"{run.id}/s/0/1"
    claim(db, [row_id])
    values = {"id": row_id, "state": "succeeded", "outputs": {"text": "ok"}, "error": None,
              "error_kind": None, "cache_hit": False, "exit_code": 0, "stdout_tail": "",
              "stderr_tail": "", "now": NOW, "duration_ms": 12.5, "not_before": None}
    assert transitions.finish_attempt(db, values, pid=999) is None  # not its process
    done = transitions.finish_attempt(db, values, pid=4242)
    assert done is not None and done.duration_ms == 12.5 and done.source == "production"
    assert transitions.finish_attempt(db, values, pid=4242) is None  # recorded once
    (row,) = rows(db, run)
    assert (row.state, row.outputs) == ("succeeded", {"text": "ok"})
    with pytest.raises(IllegalTransition):
        transitions.finish_attempt(db, {**values, "state": "pending"}, pid=4242)


def test_a_dead_process_s_attempts_are_lost_and_only_its_own(db: Session) -> None:
    run = a_run(db)
    transitions.launch_attempts(db, attempts(run, 2))
    claim(db, [f"{run.id}/s/0/1"], pid=111)
    claim(db, [f"{run.id}/s/1/1"], pid=222)
    lost = transitions.lose_process(db, [f"{run.id}/s/0/1", f"{run.id}/s/1/1"], 111,
                                    "died", NOW)
    assert lost == [f"{run.id}/s/0/1"]
    first, second = rows(db, run)
    assert (first.state, first.error_kind, first.error) == ("lost", "lost", "died")
    assert second.state == "running"
    transitions.declare_lost(second, "no heartbeat", NOW)
    assert (second.state, second.finished_at) == ("lost", NOW)
    retry = transitions.add_attempt(
        db, id=f"{run.id}/s/1/2", run_id=run.id, step_id="s", item_index=1, attempt=2,
        skill="transitions-probe", version=1, source="production", queue="default", inputs={},
        input_hash="h")
    db.flush()
    assert retry.state == "pending"
    with pytest.raises(IllegalTransition):
        transitions.take_over(second, worker="w@h", pid=3, daemon=None, now=NOW)


def test_take_over_a_pending_attempt_never_a_running_one(db: Session) -> None:
    run = a_run(db)
    transitions.launch_attempts(db, attempts(run, 2))
    claim(db, [f"{run.id}/s/0/1"], pid=111)
    running, pending = rows(db, run)
    with pytest.raises(IllegalTransition):
        transitions.take_over(running, worker="w2@h", pid=333, daemon="d2", now=NOW)
    transitions.take_over(pending, worker="w2@h", pid=333, daemon="d2", now=NOW)
    assert (pending.state, pending.worker_pid, pending.worker) == ("running", 333, "w2@h")


def test_a_skipped_item_is_a_failed_one_dropped(db: Session) -> None:
    run = a_run(db)
    transitions.launch_attempts(db, attempts(run, 1))
    (row,) = rows(db, run)
    with pytest.raises(IllegalTransition):
        transitions.skip_failed(row)  # pending: it never failed
    claim(db, [row.id])
    transitions.finish_attempt(db, {"id": row.id, "state": "failed", "outputs": None,
                                    "error": "e", "error_kind": "failed",
                                    "cache_hit": False, "exit_code": 1, "stdout_tail": "",
                                    "stderr_tail": "", "now": NOW, "duration_ms": 1.0,
                                    "not_before": None}, pid=4242)
    (row,) = rows(db, run)
    transitions.skip_failed(row)
    assert row.state == "skipped"


def test_a_failed_run_cancels_what_waits_and_leaves_what_runs(db: Session) -> None:
    run = a_run(db)
    transitions.start_run(run, NOW)
    transitions.launch_attempts(db, attempts(run, 3))
    claim(db, [f"{run.id}/s/0/1"])
    transitions.fail_run(db, run, error="step 's' item 2 failed: x", step="s", item=2,
                         now=NOW)
    assert (run.state, run.failed_step, run.failed_item) == ("failed", "s", 2)
    states = [(r.state, r.error_kind) for r in rows(db, run)]
    assert states == [("running", None), ("cancelled", "cancelled"),
                      ("cancelled", "cancelled")]


def test_cancel_ends_the_run_its_attempts_and_its_nested_runs(db: Session) -> None:
    run = a_run(db)
    transitions.start_run(run, NOW)
    transitions.launch_attempts(db, attempts(run, 2))
    claim(db, [f"{run.id}/s/0/1"])
    child = a_run(db, parent=f"{run.id}/s/0/1")
    transitions.launch_attempts(db, attempts(child, 1))
    stopped = transitions.cancel_run(db, run.id, "cancelled by test", NOW)
    assert stopped == [f"{run.id}/s/0/1"]  # the one running: its process is to be ended
    db.expire_all()
    assert (run.state, run.error, run.watch_at) == ("cancelled", "cancelled by test", None)
    assert {r.state for r in rows(db, run)} == {"cancelled"}
    assert db.get(PipelineRun, child.id).state == "cancelled"
    assert {r.state for r in rows(db, child)} == {"cancelled"}
    assert transitions.cancel_run(db, run.id, "again") == []  # ended: left as it ended
    assert db.get(PipelineRun, run.id).error == "cancelled by test"


def test_a_nested_run_settles_the_step_that_started_it(db: Session) -> None:
    run = a_run(db)
    transitions.launch_attempts(db, attempts(run, 2))
    claim(db, [f"{run.id}/s/0/1", f"{run.id}/s/1/1"])
    ok_step, bad_step = rows(db, run)
    ok, bad = a_run(db, parent=ok_step.id), a_run(db, parent=bad_step.id)
    for child in (ok, bad):
        transitions.start_run(child, NOW)
    transitions.succeed_run(ok, {"text": "out"}, NOW)
    transitions.fail_run(db, bad, error="inner failed", step="x", item=None, now=NOW)
    transitions.settle_parent(ok_step, ok, NOW)
    transitions.settle_parent(bad_step, bad, NOW)
    assert (ok_step.state, ok_step.outputs) == ("succeeded", {"text": "out"})
    assert bad_step.state == "failed" and "inner failed" in (bad_step.error or "")
    with pytest.raises(IllegalTransition):
        transitions.settle_parent(ok_step, ok, NOW)  # settled once
