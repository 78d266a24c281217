"""Following a run to its end from a client: the LISTEN connection that hears the run's
end and then its benchmarks.json files (``RunEndListener``), which ``wait_run``
(orchestrator/launch.py) drives."""

from __future__ import annotations

import sys
import time
from typing import Any

import psycopg
from psycopg.rows import dict_row

from lifecycle.recording import FILES_DONE_CHANNEL, ended_run_files, write_files
from lifecycle.run_end_notice import RUN_DONE_CHANNEL, record_of, run_of
from orchestrator import run_listeners
from orchestrator.connect import Connection, client_context
from shared.db import libpq
from shared.db.models import PipelineRun
from shared.errors import RunNotFound
from shared.states import RunState


def to_stderr(message: str) -> None:
    # sys.stderr as it is now: under a live progress display, that prints above the bar
    print(message, file=sys.stderr, flush=True)


FILES_WAIT_S = 10.0  # a worker writes them within milliseconds: this bounds a dead one


class RunEndListener:
    """The LISTEN connection for run ends and their files, opened again after an outage
    broke it."""

    def __init__(self, database_url: str) -> None:
        self._database_url = database_url
        self._pg: psycopg.Connection[Any] | None = None
        self._heard: set[tuple[str, str]] = set()  # (channel, run id) announced
        self._records: dict[str, PipelineRun] = {}  # run id -> the record its end carried
        self._read: tuple[str, str | None] | None = None  # a run's state, read by ``open``

    def open(self, run_id: str | None = None) -> None:
        """Listen, on a connection of its own unless it has one; with ``run_id``, that
        run's state is read in the LISTEN's round trip, once it listens, for the
        ``state`` that follows."""
        if self._pg is None:
            then = None if run_id is None else \
                f"SELECT state FROM pipeline_runs WHERE id = {libpq.literal(run_id)}"  # noqa: S608 - a literal libpq quoted
            self._pg, rows = run_listeners.take_reading(
                self._database_url, (RUN_DONE_CHANNEL, FILES_DONE_CHANNEL), then)
            if run_id is not None:
                self._read = (run_id, str(rows[0][0]) if rows else None)
            # An end heard on a connection an outage broke says nothing of this one,
            # which may have begun listening after the files' notice.
            self._heard = {h for h in self._heard if h[0] == FILES_DONE_CHANNEL}

    def state(self, run_id: str) -> str | None:
        """The run's state as committed now (None: no such run), read on this
        connection: a LISTEN connection answers queries between notifications (or as
        ``open`` read it just now)."""
        read, self._read = self._read, None
        if read is not None and read[0] == run_id:
            return read[1]
        assert self._pg is not None
        row = self._pg.execute("SELECT state FROM pipeline_runs WHERE id = %s",
                               (run_id,)).fetchone()
        return None if row is None else str(row[0])

    def ended(self, run_id: str) -> PipelineRun | None:
        """The run's whole record if it has ended, else None.

        As its end's notice carried it (lifecycle/run_end_notice.py), or read on this
        connection as ``state`` is (a session's read would add a pool checkout, a
        transaction and the ORM's load to the end of every wait): a PipelineRun outside
        any session, as run_progress gives one. The connection goes on listening, for
        the run's files (``await_files``)."""
        carried = self._records.pop(run_id, None)
        if carried is not None:
            return carried
        assert self._pg is not None
        columns = [c.name for c in PipelineRun.__table__.columns]
        with self._pg.cursor(row_factory=dict_row) as cur:
            row = cur.execute(f"SELECT {', '.join(columns)} FROM pipeline_runs "  # noqa: S608 - the model's own column names
                              "WHERE id = %s", (run_id,)).fetchone()
        if row is None:
            raise RunNotFound(run_id)
        return PipelineRun(**row) if RunState(row["state"]).terminal else None

    def wait(self, run_id: str, timeout_s: float, channel: str = RUN_DONE_CHANNEL) -> bool:
        """Until ``channel`` announces the run (True) or ``timeout_s`` passed (False)."""
        assert self._pg is not None
        deadline, polled = time.monotonic() + timeout_s, False
        while (channel, run_id) not in self._heard:
            left_s = deadline - time.monotonic()
            if polled and left_s <= 0:
                return False
            polled = True  # at least once, with a timeout of 0 too
            # Each batch read whole (stop_after): leaving the generator mid-batch would
            # drop the notices read with the one awaited, such as this run's files'.
            for note in self._pg.notifies(timeout=max(0.0, left_s), stop_after=1):
                if run_of(note.payload) != run_id:
                    continue
                self._heard.add((note.channel, run_id))
                if note.channel == RUN_DONE_CHANNEL:
                    record = record_of(note.payload, self._pg.info.timezone)
                    if record is not None:
                        self._records[run_id] = record
        return True

    def await_files(self, conn: Connection, run: PipelineRun) -> None:
        """Until the ended run's benchmarks.json windows are written (up to FILES_WAIT_S).

        Its files' notice follows its end's: a connection that heard the end was
        listening before it, so it hears the files too. One that LISTENed only after
        the run had ended may have missed it: the windows are written here instead,
        from the database (benchfile.refresh: whoever writes last writes what is
        committed). A broken connection is left to the same: the run's record is read."""
        try:
            self.wait(run.id, 0.0)  # what arrived meanwhile
            if (FILES_DONE_CHANNEL, run.id) in self._heard:
                return
            if (RUN_DONE_CHANNEL, run.id) in self._heard:
                if not self.wait(run.id, FILES_WAIT_S, FILES_DONE_CHANNEL):
                    to_stderr(f"the benchmarks.json of run {run.id}'s skills may not show "
                               f"it yet: its worker has not written them in {FILES_WAIT_S:g} s")
                return
        except psycopg.Error:
            self.close()
        ctx = client_context(conn)
        write_files(ctx, ended_run_files(ctx, run))

    def close(self) -> None:
        # close(), not the context manager: leaving that after an error tries a rollback
        # on the dead connection and logs a warning about it
        pg, self._pg = self._pg, None
        self._read = None
        if pg is not None:
            pg.close()

    def release(self) -> None:
        """The wait is over: keep the connection for the next one (run_listeners)."""
        pg, self._pg, self._read = self._pg, None, None
        if pg is not None:
            run_listeners.give_back(self._database_url, pg)
