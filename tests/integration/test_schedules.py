"""Schedules fired by real `skillq beat` processes against the real stack.

One beat run covers it all, to wait for one minute boundary only: an every-minute
schedule fires on time (once), a paused one does not, a second beat waits on the lock
and runs nothing twice, takes over after the first is killed -9; a missed occurrence
runs once on start (--catch-up once) or is skipped (--catch-up skip).
"""

from __future__ import annotations

import contextlib
import json
import re
import signal
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from conftest import VAULTS, Stack, copy_vault, skillq_argv, tail, wait_until
from sqlalchemy import select, text, update

from shared.cron import parse_cron
from shared.db.models import PipelineRun
from shared.db.schedule_models import Schedule

pytestmark = pytest.mark.integration

TICK_S = 0.5  # SKILLQ_BEAT_TICK_S: how soon a waiting beat retries the lock
MINUTE_WAIT_S = 75.0  # the next minute boundary, plus the beat's start
# A run is recorded this soon after its due time (or after beat got the lock): start_run
# first asks the workers which queues they serve (a 2 s broadcast), then plans.
ON_TIME_S = 5.0
YEARLY = "0 3 1 1 *"  # does not come round during the test


class Beat:
    def __init__(self, stack: Stack, cwd: Path, name: str) -> None:
        self.log = stack.home / "logs" / f"beat-{name}.log"
        env = {**stack.cli_env, "SKILLQ_BEAT_TICK_S": str(TICK_S)}
        with self.log.open("ab") as fh:
            self.proc = subprocess.Popen(skillq_argv("beat"), env=env, cwd=cwd,
                                         stdin=subprocess.DEVNULL, stdout=fh,
                                         stderr=subprocess.STDOUT)

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, needle: str, timeout_s: float = 30.0) -> None:
        def seen() -> bool:
            assert self.proc.poll() is None, f"beat exited:\n{tail(self.log)}"
            return needle in self.text()

        wait_until(seen, timeout_s, f"'{needle}' in {self.log}:\n{tail(self.log)}",
                   every_s=0.1)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=10)
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


@pytest.fixture
def beats(healthy: Stack, tmp_path: Path) -> Iterator[list[Beat]]:
    started: list[Beat] = []
    yield started
    for beat in started:
        beat.stop()
    with healthy.db() as session:  # no schedule left for another test's beat
        session.execute(Schedule.__table__.delete())


def add(stack: Stack, vault: Path, cwd: Path, *args: str) -> int:
    proc = stack.cli("schedule", "add", "echo", "--vault", str(vault), *args, cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    found = re.search(r"schedule (\d+):", proc.stdout)
    assert found, proc.stdout
    return int(found.group(1))


def runs_of(stack: Stack, schedule_id: int) -> list[PipelineRun]:
    with stack.db() as session:
        rows = list(session.scalars(select(PipelineRun).where(
            PipelineRun.triggered_by == f"schedule:{schedule_id}")
            .order_by(PipelineRun.created_at)))
        session.expunge_all()
        return rows


def schedule(stack: Stack, schedule_id: int) -> Schedule:
    with stack.db() as session:
        row = session.get(Schedule, schedule_id)
        assert row is not None
        session.expunge(row)
        return row


def set_due(stack: Stack, schedule_id: int, when: datetime) -> None:
    with stack.db() as session:
        session.execute(update(Schedule).where(Schedule.id == schedule_id)
                        .values(next_due_at=when))


def test_add_checks_inputs_and_cron_as_run_does(healthy: Stack, tmp_path: Path) -> None:
    vault = copy_vault(VAULTS / "pipes", tmp_path / "vault")
    with healthy.db() as session:  # the other test of this module may have run first
        before = len(session.scalars(select(Schedule)).all())
    run = healthy.cli("run", "echo", "--vault", str(vault), "--input", "txt=hi", cwd=tmp_path)
    sched = healthy.cli("schedule", "add", "echo", "--vault", str(vault), "--cron",
                        "0 7 * * *", "--input", "txt=hi", cwd=tmp_path)
    assert run.returncode == sched.returncode == 2, (run.stderr, sched.stderr)
    assert sched.stderr == run.stderr and "did you mean 'text'?" in sched.stderr
    bad = healthy.cli("schedule", "add", "echo", "--vault", str(vault), "--cron",
                      "0 25 * * *", "--tz", "Europe/Paris", "--input", "text=hi",
                      cwd=tmp_path)
    assert bad.returncode == 2 and "--cron '0 25 * * *'" in bad.stderr, bad.stderr
    assert "Traceback" not in bad.stderr
    zone = healthy.cli("schedule", "add", "echo", "--vault", str(vault), "--cron",
                       "0 7 * * *", "--tz", "Mars/Olympus", "--input", "text=hi",
                       cwd=tmp_path)
    assert zone.returncode == 2 and "unknown time zone" in zone.stderr, zone.stderr
    with healthy.db() as session:
        assert len(session.scalars(select(Schedule)).all()) == before  # nothing half-added


def test_beat_fires_on_time_once_and_a_second_beat_takes_over(
        healthy: Stack, beats: list[Beat], tmp_path: Path) -> None:
    vault = copy_vault(VAULTS / "pipes", tmp_path / "vault")
    every = add(healthy, vault, tmp_path, "--cron", "* * * * *", "--input", "text=every")
    paused = add(healthy, vault, tmp_path, "--cron", "* * * * *", "--input", "text=paused")
    assert healthy.cli("schedule", "pause", str(paused), cwd=tmp_path).returncode == 0
    once = add(healthy, vault, tmp_path, "--cron", YEARLY, "--tz", "Europe/Paris",
               "--input", "text=once", "--catch-up", "once")
    skip = add(healthy, vault, tmp_path, "--cron", YEARLY, "--input", "text=skip",
               "--catch-up", "skip")
    long_ago = datetime.now(UTC) - timedelta(minutes=10)  # missed: beat was down
    set_due(healthy, once, long_ago)
    set_due(healthy, skip, long_ago)

    first = Beat(healthy, tmp_path, "first")
    beats.append(first)
    first.wait_for("holding the beat lock")
    locked_at = datetime.now(UTC)
    second = Beat(healthy, tmp_path, "second")
    beats.append(second)
    second.wait_for("another beat is active: skillq-beat")

    # The missed ones, at once: `once` runs one time, `skip` does not, both move on.
    caught = wait_until(lambda: runs_of(healthy, once), 15, "the catch-up run")
    assert [r.source for r in caught] == ["production"]
    assert healthy.wait_run(caught[0].id).state == "succeeded"
    for sid in (once, skip):
        row = schedule(healthy, sid)
        assert row.last_due_at == long_ago and row.next_due_at > locked_at
    assert schedule(healthy, once).last_outcome == "caught up"
    assert schedule(healthy, skip).last_outcome == "skipped" and not runs_of(healthy, skip)

    # The every-minute one, at the next minute boundary, once.
    fired = wait_until(lambda: runs_of(healthy, every), MINUTE_WAIT_S, "the minute's run")
    due = schedule(healthy, every).last_due_at
    assert due is not None and due.second == 0
    assert due <= fired[0].created_at < max(due, locked_at) + timedelta(seconds=ON_TIME_S)
    assert healthy.wait_run(fired[0].id).state == "succeeded"
    assert fired[0].inputs["text"] == "every" and fired[0].source == "production"
    assert not runs_of(healthy, paused)
    assert "holding the beat lock" not in second.text()  # it fired nothing

    # kill -9 the first: the second takes the lock and fires what is due, once.
    first.proc.send_signal(signal.SIGKILL)
    first.proc.wait(timeout=10)
    second.wait_for("holding the beat lock", timeout_s=10)
    set_due(healthy, every, datetime.now(UTC))
    wait_until(lambda: len(runs_of(healthy, every)) == 2, 10, "the second beat's run")
    with healthy.db() as session:
        since = session.scalars(select(PipelineRun.triggered_by).where(
            PipelineRun.triggered_by.like("schedule:%"))).all()
    assert sorted(since) == sorted([f"schedule:{every}"] * 2 + [f"schedule:{once}"])
    # --exit-if-locked does not wait; a beat whose lock connection dies stops firing.
    third = healthy.cli("beat", "--exit-if-locked", cwd=tmp_path, timeout_s=30)
    assert third.returncode == 1 and "another beat is active: skillq-beat" in third.stderr
    with healthy.db() as session:
        session.execute(text("select pg_terminate_backend(pid) from pg_stat_activity "
                             "where application_name like 'skillq-beat %'"))
    assert second.proc.wait(timeout=10) == 1
    assert "error: beat lost its lock" in second.text(), tail(second.log)

    listing = healthy.cli("schedule", "list", "--json", cwd=tmp_path)
    assert listing.returncode == 0, listing.stderr
    rows = {r["id"]: r for r in json.loads(listing.stdout)}
    assert rows[paused]["paused"] is True and rows[paused]["next_run"] is None
    assert rows[once]["last_run_state"] == "succeeded"
    yearly = parse_cron(YEARLY, "Europe/Paris").next_after(datetime.now(UTC))
    assert rows[once]["next_run"] == yearly.isoformat()  # ISO 8601, UTC
    assert f"{yearly.astimezone(ZoneInfo('Europe/Paris')):%Y-%m-%d} 03:00 CET" in \
        healthy.cli("schedule", "list", cwd=tmp_path).stdout
    table = healthy.cli("schedule", "list", cwd=tmp_path, env={"COLUMNS": "250"})
    assert table.returncode == 0 and "caught up" in table.stdout, table.stderr
    assert healthy.cli("schedule", "resume", str(paused), cwd=tmp_path).returncode == 0
    assert not schedule(healthy, paused).paused
    assert healthy.cli("schedule", "remove", str(every), cwd=tmp_path).returncode == 0
    gone = healthy.cli("schedule", "pause", str(every), cwd=tmp_path)
    assert gone.returncode == 1 and f"no schedule {every}" in gone.stderr
