"""A run's benchmarks.json windows are written just after its final commit, off the path
to its result (lifecycle/recording.py), and still show it when `skillq run` or
`skillq wait` returns: the worker announces them written, and a client that listened
only after the run had ended writes them itself from the database."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import RunResult, Stack, free_port
from filelock import FileLock

from lifecycle.context import WorkerContext
from lifecycle.recording import FILES_DONE_CHANNEL, FilesDue, write_files
from lifecycle.run_end_notice import RUN_DONE_CHANNEL, run_of
from shared.db import libpq
from shared.settings import Settings

pytestmark = pytest.mark.integration
HOLD_S = 1.5  # how long a test holds a benchmarks.json lock


def window(vault: Path, skill: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((vault / skill / "benchmarks.json").read_text())
    return data


def shows(vault: Path, skill: str, run_id: str) -> bool:
    """The skill's window lists the run's step (a leaf's entries are its attempts)."""
    return any(r["run_id"].startswith(f"{run_id}/") for r in window(vault, skill)["runs"])


def test_skillq_run_returns_only_once_its_files_show_the_run(
        healthy: Stack, vault: Path, run_skill: Callable[..., RunResult]) -> None:
    warm = run_skill("token", vault, "--json", inputs={"key": "files"})
    assert warm.code == 0 and warm.run_id is not None, warm
    assert shows(vault, "token", warm.run_id)
    # Hold the file's lock (lifecycle/benchfile.py) as a slow writer would: the cache
    # hit's record is committed at once, but its window waits for the lock.
    lock = FileLock(str(healthy.home / "locks" / "token.benchmarks.lock"),
                    thread_local=False)
    lock.acquire()
    released = threading.Timer(HOLD_S, lock.release)
    released.start()
    try:
        t0 = time.monotonic()
        hit = run_skill("token", vault, "--json", inputs={"key": "files"})
        took_s = time.monotonic() - t0
    finally:
        released.join()
    assert hit.code == 0 and hit.run_id is not None, hit
    assert hit.json() == warm.json()
    assert shows(vault, "token", hit.run_id), window(vault, "token")["runs"][-3:]
    assert took_s >= HOLD_S * 0.9, f"returned after {took_s:.2f} s, before the file"


def test_the_worker_announces_the_files_after_the_run_s_end(
        healthy: Stack, vault: Path, tmp_path: Path) -> None:
    with libpq.connect(healthy.endpoints.database_url) as pg:
        pg.execute(f"LISTEN {RUN_DONE_CHANNEL}; LISTEN {FILES_DONE_CHANNEL}")
        before = healthy.run_ids("token")
        started = healthy.cli("run", "token", "--vault", str(vault), "--input", "key=told",
                              "--detach", cwd=tmp_path)
        assert started.returncode == 0, started.stderr
        run_id = healthy.new_run("token", before)
        heard: list[str] = []
        seen_with_files = None
        deadline = time.monotonic() + 60
        while FILES_DONE_CHANNEL not in heard and time.monotonic() < deadline:
            for note in pg.notifies(timeout=1):
                if run_of(note.payload) == run_id:
                    heard.append(note.channel)
                    if note.channel == FILES_DONE_CHANNEL:
                        seen_with_files = shows(vault, "token", run_id)
                        break
    assert heard == [RUN_DONE_CHANNEL, FILES_DONE_CHANNEL]
    assert seen_with_files, "announced written, but the file did not show the run"


def test_a_client_that_listened_after_the_end_writes_the_files_itself(
        healthy: Stack, vault: Path, tmp_path: Path) -> None:
    before = healthy.run_ids("token")
    started = healthy.cli("run", "token", "--vault", str(vault), "--input", "key=late",
                          "--detach", cwd=tmp_path)
    assert started.returncode == 0, started.stderr
    run_id = healthy.new_run("token", before)
    healthy.wait_run(run_id)
    deadline = time.monotonic() + 30
    while not shows(vault, "token", run_id) and time.monotonic() < deadline:
        time.sleep(0.05)
    # The window as it was before the run: the worker's notice went out long ago, so
    # `skillq wait` cannot hear it, and must not return with this file.
    data = window(vault, "token")
    data["runs"] = [r for r in data["runs"] if not r["run_id"].startswith(f"{run_id}/")]
    (vault / "token" / "benchmarks.json").write_text(json.dumps(data))
    waited = healthy.cli("wait", run_id, "--json", cwd=tmp_path)
    assert waited.returncode == 0, waited.stderr
    assert json.loads(waited.stdout)["run_id"] == run_id
    assert shows(vault, "token", run_id)
    assert "may not show" not in waited.stderr


def test_a_failed_run_s_files_show_it_when_skillq_run_exits(
        healthy: Stack, vault: Path, run_skill: Callable[..., RunResult]) -> None:
    failed = run_skill("fail-on", vault, inputs={"item": "x", "fail": ["x"]})
    assert failed.code == 1 and failed.run_id is not None, failed
    assert "boom" in failed.stderr or "failed" in failed.stderr, failed
    assert shows(vault, "fail-on", failed.run_id)


def test_files_with_the_database_away_are_one_warning_not_a_traceback(
        tmp_path: Path, vault: Path, caplog: pytest.LogCaptureFixture) -> None:
    """What a `skillq run` writing the files itself prints when the database went away
    after the run's end: one line (the CLI has no log handler of its own, and Python's
    last-resort one would print a traceback), and nothing raised."""
    url = f"postgresql+psycopg://skillq@127.0.0.1:{free_port()}/skillq?connect_timeout=2"
    ctx = WorkerContext(settings=Settings(_env_file=None, home=tmp_path, vault=vault,
                                          database_url=url),
                        database_url=url, vault=vault, hostname="here", pid=1)
    before = (vault / "token" / "benchmarks.json").read_text()
    with caplog.at_level(logging.WARNING, logger="lifecycle.recording"):
        write_files(ctx, FilesDue("run-gone", vault, ("token",), run_ended=True))
    said = [r for r in caplog.records if r.name == "lifecycle.recording"]
    assert len(said) == 1 and said[0].levelno == logging.WARNING, said
    assert said[0].exc_info is None
    assert "database is unreachable" in said[0].getMessage()
    assert (vault / "token" / "benchmarks.json").read_text() == before
