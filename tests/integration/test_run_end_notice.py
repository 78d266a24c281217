"""A run's end carries its committed row (lifecycle/run_end_notice.py): what a waiting
`skillq run` prints without reading the run again must be the row, column for column;
a row too large for a NOTIFY is announced by its id alone and read."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
from conftest import RunResult, Stack
from psycopg.rows import dict_row

from lifecycle.run_end_notice import ROW_MAX_BYTES, RUN_DONE_CHANNEL, record_of, run_of
from shared.db import libpq


def _notice(pg: psycopg.Connection[Any], run_id: str) -> str:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for note in pg.notifies(timeout=1):
            if run_of(note.payload) == run_id:
                return note.payload
    raise AssertionError(f"no end announced for run {run_id}")


def _row(pg: psycopg.Connection[Any], run_id: str) -> dict[str, Any]:
    with pg.cursor(row_factory=dict_row) as cur:
        row = cur.execute("SELECT * FROM pipeline_runs WHERE id = %s", (run_id,)).fetchone()
    assert row is not None
    return row


def test_a_run_s_end_carries_the_row_it_committed(
        healthy: Stack, vault: Path, run_skill: Callable[..., RunResult]) -> None:
    with libpq.connect(healthy.endpoints.database_url) as pg:
        pg.execute(f"LISTEN {RUN_DONE_CHANNEL}")
        done = run_skill("echo", vault, "--json", inputs={"text": "carried é ✓"})
        assert done.code == 0, done
        assert done.run_id is not None
        payload = _notice(pg, done.run_id)
        carried = record_of(payload, pg.info.timezone)
        row = _row(pg, done.run_id)
    assert carried is not None, payload[:200]
    assert {name: getattr(carried, name) for name in row} == row
    assert carried.state == "succeeded" and carried.outputs == {"text": "carried é ✓"}
    assert carried.finished_at is not None and carried.finished_at.tzinfo is not None
    assert done.json() == {"text": "carried é ✓"}


def test_a_row_too_large_to_carry_is_announced_by_its_id_and_read(
        healthy: Stack, vault: Path, run_skill: Callable[..., RunResult]) -> None:
    text = "x" * (ROW_MAX_BYTES + 100)  # in the inputs and the outputs: twice over
    with libpq.connect(healthy.endpoints.database_url) as pg:
        pg.execute(f"LISTEN {RUN_DONE_CHANNEL}")
        done = run_skill("echo", vault, "--json", inputs={"text": text})
        assert done.code == 0, done
        assert done.run_id is not None
        payload = _notice(pg, done.run_id)
    assert payload == done.run_id
    assert done.json() == {"text": text}  # `skillq run` read it
