"""Writes deferred to the commit (shared/db/deferred.py), against real PostgreSQL: they
land with the transaction's COMMIT and only then, a failing one takes the whole
transaction with it as SQLAlchemy's own error, and one made in a rolled-back savepoint
is never sent. The UPDATE of a row the transaction holds FOR UPDATE goes with them."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from conftest import Stack
from psycopg import pq
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from lifecycle.planner import lock_run
from shared.db import deferred, libpq
from shared.db.models import PipelineRun
from shared.db.pipelined import pipelined
from shared.db.session import transaction
from shared.states import RunState

pytestmark = pytest.mark.integration

PUT = "INSERT INTO deferred_probe (id, what) VALUES (%(id)s, %(what)s)"


@pytest.fixture
def url(stack: Stack) -> Iterator[str]:
    url = stack.endpoints.database_url
    with libpq.connect(url) as pg:
        pg.execute("CREATE TABLE IF NOT EXISTS deferred_probe (id int PRIMARY KEY, what text)")
        pg.execute("TRUNCATE deferred_probe")
    yield url
    with libpq.connect(url) as pg:
        pg.execute("DROP TABLE deferred_probe")


def stored(url: str) -> list[tuple[int, str]]:
    with libpq.connect(url) as pg:
        return [(int(r[0]), str(r[1])) for r in
                pg.execute("SELECT id, what FROM deferred_probe ORDER BY id").fetchall()]


def test_deferred_writes_land_with_the_commit_after_the_transaction_s_own(url: str) -> None:
    with transaction(url) as session:
        deferred.defer(session, PUT, {"id": 2, "what": "deferred"})
        session.execute(text("INSERT INTO deferred_probe VALUES (1, 'at once')"))
        # Not sent yet: the transaction itself does not see them.
        assert session.scalar(text("SELECT count(*) FROM deferred_probe")) == 1
        assert stored(url) == []  # nor does anyone else, before the commit
    assert stored(url) == [(1, "at once"), (2, "deferred")]
    # The session's connection is back in the pool in a clean state: the next
    # transaction on it works and commits as usual.
    with transaction(url) as session:
        session.execute(text("INSERT INTO deferred_probe VALUES (3, 'next')"))
    assert [i for i, _ in stored(url)] == [1, 2, 3]


def test_a_failing_deferred_write_rolls_back_the_whole_transaction(url: str) -> None:
    with transaction(url) as session:
        session.execute(text("INSERT INTO deferred_probe VALUES (1, 'kept')"))
    with pytest.raises(IntegrityError), transaction(url) as session:
        session.execute(text("INSERT INTO deferred_probe VALUES (2, 'lost with it')"))
        deferred.defer(session, PUT, {"id": 1, "what": "a duplicate key"})
    assert stored(url) == [(1, "kept")]


def test_a_deferred_write_inside_a_rolled_back_savepoint_is_not_sent(url: str) -> None:
    with transaction(url) as session:
        deferred.defer(session, PUT, {"id": 1, "what": "before"})
        with pytest.raises(RuntimeError), session.begin_nested():
            deferred.defer(session, PUT, {"id": 2, "what": "rolled back"})
            raise RuntimeError("undo the savepoint")
        deferred.defer(session, PUT, {"id": 3, "what": "after"})
    assert stored(url) == [(1, "before"), (3, "after")]


def test_a_released_savepoint_leaves_the_deferred_writes_to_the_transaction(url: str) -> None:
    """Releasing a savepoint is no commit: the writes deferred before and inside it
    stay pending, and go (or not) with the transaction itself."""
    with pytest.raises(RuntimeError), transaction(url) as session:
        deferred.defer(session, PUT, {"id": 1, "what": "before"})
        with session.begin_nested():
            deferred.defer(session, PUT, {"id": 2, "what": "inside"})
        assert stored(url) == []  # nothing sent, nothing committed
        raise RuntimeError("roll the transaction back")
    assert stored(url) == []
    with transaction(url) as session:
        with session.begin_nested():
            deferred.defer(session, PUT, {"id": 3, "what": "kept"})
        session.execute(text("INSERT INTO deferred_probe VALUES (4, 'after it')"))
    assert stored(url) == [(3, "kept"), (4, "after it")]


def test_a_commit_with_a_savepoint_left_open_says_its_writes_were_not_sent(url: str) -> None:
    """SQLAlchemy then commits the transaction before the savepoint: rather than drop
    what was deferred without a word, the commit raises."""
    with pytest.raises(RuntimeError, match="savepoint still open"), \
            transaction(url) as session:
        deferred.defer(session, PUT, {"id": 1, "what": "never sent"})
        session.begin_nested()
    assert stored(url) == []


def a_run(run_id: str) -> PipelineRun:
    return PipelineRun(id=run_id, skill="probe", version=1, state="pending",
                       source="test", vault="/nowhere", plan={"steps": []}, inputs={},
                       input_hash="sha256:0")


def test_a_new_row_s_insert_joins_the_pipeline_and_fails_with_it(url: str) -> None:
    run_id = f"run-deferred-{uuid.uuid4().hex[:8]}"
    with transaction(url) as session:
        session.add(a_run(run_id))  # INSERT only, nothing read back: in the pipeline
        deferred.defer(session, PUT, {"id": 1, "what": run_id})
    with transaction(url) as session:
        stored_run = session.get(PipelineRun, run_id)
        assert stored_run is not None and stored_run.created_at is not None
    assert stored(url) == [(1, run_id)]
    # The same id again: the INSERT fails at the pipeline's sync, and takes the
    # transaction's other writes with it.
    with pytest.raises(IntegrityError), transaction(url) as session:
        session.add(a_run(run_id))
        deferred.defer(session, PUT, {"id": 2, "what": "lost with it"})
    assert stored(url) == [(1, run_id)]
    with transaction(url) as session:
        session.execute(text("DELETE FROM pipeline_runs WHERE id = :id"), {"id": run_id})


def run_state(url: str, run_id: str) -> tuple[str, Any]:
    with libpq.connect(url) as pg:
        row = pg.execute("SELECT state, progress FROM pipeline_runs WHERE id = %s",
                         (run_id,)).fetchone()
    assert row is not None
    return str(row[0]), row[1]


@pytest.fixture
def run_id(url: str) -> Iterator[str]:
    run_id = f"run-held-{uuid.uuid4().hex[:8]}"
    with transaction(url) as session:
        session.add(a_run(run_id))
    yield run_id
    with transaction(url) as session:
        session.execute(text("DELETE FROM pipeline_runs WHERE id = :id"), {"id": run_id})


def frontend_messages(trace: str) -> list[str]:
    """What the client sent, in order, from a libpq protocol trace: each message's type,
    a Parse with its statement's first two words ("Parse UPDATE pipeline_runs", "Sync")."""
    sent = []
    for line in trace.splitlines():
        fields = line.split("\t")
        if len(fields) >= 3 and fields[0] == "F":
            kind = fields[2].strip()
            if kind == "Parse":  # F, length, Parse, ' "" "SQL..." n'
                kind = " ".join(["Parse", *fields[3].split('"')[3].split(" ")[:2]])
            sent.append(kind)
    return sent


@contextmanager
def wire(session: Session, path: Path) -> Iterator[list[str]]:
    """The frontend messages the session's connection sends inside the block, in order
    (``frontend_messages`` of libpq's trace), filled as the block ends."""
    sent: list[str] = []
    pgconn = session.connection().connection.driver_connection.pgconn  # type: ignore[union-attr]
    with path.open("w+b") as trace:
        pgconn.trace(trace.fileno())
        pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
        try:
            yield sent
        finally:
            pgconn.untrace()
            trace.seek(0)
            sent.extend(frontend_messages(trace.read().decode()))


def test_a_held_row_s_update_goes_with_the_commit(url: str, run_id: str,
                                                   tmp_path: Path) -> None:
    """A row this transaction holds FOR UPDATE (planner.lock_run) is written in the
    commit's pipeline, with the deferred writes: not sent before the COMMIT, and in its
    round trip (no Sync between them on the wire, as libpq's trace shows)."""
    with transaction(url) as session:
        run = lock_run(session, run_id)
        assert run is not None
        run.state, run.progress = "running", {"one": {"state": "running", "items": 1}}
        deferred.defer(session, PUT, {"id": 1, "what": "with it"})
        # Not flushed yet (a Connection's execute does not autoflush): the UPDATE
        # waits for the commit.
        assert session.connection().execute(
            text("SELECT state FROM pipeline_runs WHERE id = :id"), {"id": run_id}
        ).scalar() == "pending"
        with wire(session, tmp_path / "trace") as sent:
            session.commit()
    update = sent.index("Parse UPDATE pipeline_runs")
    commit = sent.index("Parse COMMIT")
    assert update < sent.index("Parse INSERT INTO") < commit  # the deferred write after it
    assert "Sync" not in sent[update:commit]  # one round trip with the COMMIT
    assert sent.count("Parse UPDATE pipeline_runs") == 1  # and the ORM wrote it no more
    assert sent[commit:].count("Sync") == 1  # the whole commit: one round trip
    assert run_state(url, run_id) == ("running", {"one": {"state": "running", "items": 1}})
    assert stored(url) == [(1, "with it")]
    assert not session.is_modified(run)  # written: nothing left for the ORM to flush


def test_a_failing_held_update_rolls_back_the_whole_transaction(url: str,
                                                                 run_id: str) -> None:
    with pytest.raises(IntegrityError), transaction(url) as session:
        run = lock_run(session, run_id)
        assert run is not None
        run.state = "running"
        run.skill = None  # type: ignore[assignment]  # NOT NULL: fails at the sync
        deferred.defer(session, PUT, {"id": 1, "what": "lost with it"})
    assert run_state(url, run_id)[0] == "pending"
    assert stored(url) == []


def test_other_changed_rows_go_the_orm_s_way_with_the_held_one(url: str,
                                                               run_id: str) -> None:
    """A changed row this transaction does not hold is flushed as the ORM flushes (its
    row count checked), before the commit's pipeline; both are written."""
    other = f"run-other-{uuid.uuid4().hex[:8]}"
    with transaction(url) as session:
        session.add(a_run(other))
    try:
        with transaction(url) as session:
            held = lock_run(session, run_id)
            unheld = session.get(PipelineRun, other)
            assert held is not None and unheld is not None
            held.state, unheld.state = "running", "failed"
        assert run_state(url, run_id)[0] == "running"
        assert run_state(url, other)[0] == "failed"
    finally:
        with transaction(url) as session:
            session.execute(text("DELETE FROM pipeline_runs WHERE id = :id"), {"id": other})


def test_a_row_locked_in_a_rolled_back_savepoint_is_not_held(url: str, run_id: str) -> None:
    """Rolling back to a savepoint releases the locks taken after it: the row's later
    UPDATE goes the ORM's way, and is written all the same."""
    with transaction(url) as session:
        with pytest.raises(RuntimeError), session.begin_nested():
            assert lock_run(session, run_id) is not None
            raise RuntimeError("undo the savepoint")
        run = session.get(PipelineRun, run_id)
        assert run is not None
        run.state = "running"
        assert deferred.pending(session, "skillq.held") == []
    assert run_state(url, run_id)[0] == "running"


def test_a_plain_insert_writes_the_row_as_the_transaction_left_it(url: str) -> None:
    """A new run's row (transitions.new_run) is inserted by a plain INSERT in the
    commit's pipeline, with its columns as they are at the commit; a duplicate fails
    there as the ORM's INSERT would, taking the transaction with it."""
    run_id = f"run-plain-{uuid.uuid4().hex[:8]}"
    try:
        with transaction(url) as session:
            run = a_run(run_id)
            session.add(run)
            deferred.insert_plainly(session, run)
            run.state = RunState.RUNNING  # an enum: stored as its value
            run.progress = {"one": {"state": "running", "items": 1}}
            deferred.defer(session, PUT, {"id": 1, "what": run_id})
        assert run_state(url, run_id) == ("running", {"one": {"state": "running",
                                                              "items": 1}})
        assert stored(url) == [(1, run_id)]
        with transaction(url) as session:
            again = session.get(PipelineRun, run_id)
            assert again is not None and again.created_at is not None  # the server's
            assert again.plan == {"steps": []} and again.outputs is None
        with pytest.raises(IntegrityError), transaction(url) as session:
            twin = a_run(run_id)
            session.add(twin)
            deferred.insert_plainly(session, twin)
            deferred.defer(session, PUT, {"id": 2, "what": "lost with it"})
        assert stored(url) == [(1, run_id)]
    finally:
        with transaction(url) as session:
            session.execute(text("DELETE FROM pipeline_runs WHERE id = :id"), {"id": run_id})


class _Undo(Exception):
    pass


def test_a_transaction_s_first_pipeline_carries_its_begin(url: str, tmp_path: Path) -> None:
    """psycopg sends a transaction's BEGIN with a Sync of its own and waits for it;
    ``pipelined`` sends it first in its pipeline instead, one round trip for all, and
    the transaction stays one: a later statement sends no BEGIN again, and a rollback
    takes the pipeline's write back."""
    with pytest.raises(_Undo), transaction(url) as session:
        with wire(session, tmp_path / "trace") as sent:
            with pipelined(session) as pg:
                pg.execute(PUT, {"id": 1, "what": "undone"})
                pg.execute("SELECT 1")
            assert pg.autocommit is False
            assert pg.info.transaction_status == pq.TransactionStatus.INTRANS
            session.execute(text("SELECT 2"))
        raise _Undo
    syncs = [i for i, kind in enumerate(sent) if kind == "Sync"]
    assert sent[0] == "Parse BEGIN", sent
    assert sent.index("Parse SELECT 1") < syncs[0]  # BEGIN and the pipeline: one Sync
    assert sent.count("Parse BEGIN") == 1, sent
    assert stored(url) == []
