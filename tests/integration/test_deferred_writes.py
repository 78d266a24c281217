"""Writes deferred to the commit (shared/db/deferred.py), against real PostgreSQL: they
land with the transaction's COMMIT and only then, a failing one takes the whole
transaction with it as SQLAlchemy's own error, and one made in a rolled-back savepoint
is never sent."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from conftest import Stack
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from shared.db import deferred, libpq
from shared.db.models import PipelineRun
from shared.db.session import transaction

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
