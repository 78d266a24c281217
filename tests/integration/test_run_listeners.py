"""The LISTEN connections a waiting client keeps between runs (orchestrator/run_listeners.py),
against the session stack's real PostgreSQL: one wait after another reuses a connection,
a kept one hears nothing, and one the server dropped while kept is replaced unseen."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from conftest import Stack

from lifecycle.recording import FILES_DONE_CHANNEL
from lifecycle.run_end_notice import RUN_DONE_CHANNEL
from orchestrator import run_end_listener, run_listeners
from shared.db import libpq

pytestmark = pytest.mark.integration


@pytest.fixture
def url(stack: Stack) -> Iterator[str]:
    run_listeners.close_all()
    yield stack.endpoints.database_url
    run_listeners.close_all()


def notified(url: str, payload: str) -> None:
    with libpq.connect(url) as other:
        other.execute("SELECT pg_notify(%s, %s)", (RUN_DONE_CHANNEL, payload))


def test_the_next_wait_takes_the_kept_connection_and_hears_run_ends(url: str) -> None:
    first = run_listeners.take(url, (RUN_DONE_CHANNEL,))
    pid = first.info.backend_pid
    run_listeners.give_back(url, first)

    again = run_listeners.take(url, (RUN_DONE_CHANNEL,))
    assert again.info.backend_pid == pid
    notified(url, "run-1")
    assert [n.payload for n in again.notifies(timeout=5, stop_after=1)] == ["run-1"]
    run_listeners.give_back(url, again)


def test_what_a_waiter_reads_with_its_listen_is_read_once_it_listens(url: str) -> None:
    """The state a wait checks first comes in the LISTEN's round trip, read after the
    LISTEN took effect: a run ending just before that read is heard, not missed."""
    for _ in range(2):  # a new connection, then the kept one
        pg, rows = run_listeners.take_reading(
            url, (RUN_DONE_CHANNEL,), "SELECT pg_listening_channels()")
        assert rows == [(RUN_DONE_CHANNEL,)]
        notified(url, "run-3")
        assert [n.payload for n in pg.notifies(timeout=5, stop_after=1)] == ["run-3"]
        run_listeners.give_back(url, pg)


def test_a_kept_connection_listens_to_nothing(url: str) -> None:
    pg = run_listeners.take(url, (RUN_DONE_CHANNEL,))
    run_listeners.give_back(url, pg)
    # nobody reads a kept connection: were it still listening, the server would queue
    # every run end for it
    assert pg.execute("SELECT pg_listening_channels()").fetchall() == []


def test_a_kept_connection_the_server_dropped_is_replaced(url: str) -> None:
    pg = run_listeners.take(url, (RUN_DONE_CHANNEL,))
    dropped = pg.info.backend_pid
    run_listeners.give_back(url, pg)
    with libpq.connect(url) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (dropped,))

    fresh = run_listeners.take(url, (RUN_DONE_CHANNEL,))
    assert fresh.info.backend_pid != dropped
    notified(url, "run-2")
    assert [n.payload for n in fresh.notifies(timeout=5, stop_after=1)] == ["run-2"]
    run_listeners.give_back(url, fresh)


def test_no_more_than_max_idle_are_kept(url: str) -> None:
    taken = [run_listeners.take(url, (RUN_DONE_CHANNEL,))
             for _ in range(run_listeners.MAX_IDLE + 1)]
    for pg in taken:
        run_listeners.give_back(url, pg)
    assert sum(pg.closed for pg in taken) == 1


def test_a_run_s_end_and_files_notices_in_one_packet_are_both_heard(url: str) -> None:
    """A busy client may read a run's end and its files' notice from the socket in one
    go: the wait that returns at the end must keep the files' notice for the next wait
    (a `skillq run` once waited the whole FILES_WAIT_S for a notice it had dropped)."""
    listener = run_end_listener.RunEndListener(url)
    listener.open()
    try:
        with libpq.connect(url) as other:  # one commit: both notices go out together
            other.execute("SELECT pg_notify(%s, 'run-1'), pg_notify(%s, 'run-1')",
                          (RUN_DONE_CHANNEL, FILES_DONE_CHANNEL))
        time.sleep(0.2)  # both arrive before the client reads any
        assert listener.wait("run-1", 2.0)
        t0 = time.monotonic()
        assert listener.wait("run-1", 2.0, FILES_DONE_CHANNEL)
        assert time.monotonic() - t0 < 1.0  # heard already, not waited out
    finally:
        listener.close()
