"""Cron lines in a time zone, the missed-run verdict, Flower's auth rule, and what
Flower shows of a step message (pure functions; beat itself: test_schedules.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from lifecycle.canvas import readable_args
from lifecycle.dispatch import Dispatch
from orchestrator.cli.flower_cmd import check_auth
from orchestrator.schedules.firing import decide
from shared.cron import parse_cron
from shared.errors import ConfigError, CronError


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def test_a_line_is_wall_clock_time_in_its_zone_winter_and_summer() -> None:
    line = parse_cron("0 7 * * *", "Europe/Paris")
    assert line.next_after(utc(2026, 7, 1, 6)) == utc(2026, 7, 2, 5)  # CEST, UTC+2
    assert line.next_after(utc(2026, 12, 1, 5)) == utc(2026, 12, 1, 6)  # CET, UTC+1
    assert line.next_after(utc(2026, 12, 1, 6)) == utc(2026, 12, 2, 6)  # strictly after


def test_dst_nights_a_missing_time_fires_once_a_doubled_time_fires_once() -> None:
    line = parse_cron("30 2 * * *", "Europe/Paris")
    # 2026-03-29: 02:30 does not exist in Paris; it maps to 01:30 UTC (03:30 CEST).
    assert line.next_after(utc(2026, 3, 29, 0)) == utc(2026, 3, 29, 1, 30)
    # 2026-10-25: 02:30 happens twice; the first (CEST, 00:30 UTC) only.
    assert line.next_after(utc(2026, 10, 25, 0)) == utc(2026, 10, 25, 0, 30)
    assert line.next_after(utc(2026, 10, 25, 0, 31)) == utc(2026, 10, 26, 1, 30)


def test_weekdays_steps_and_both_day_fields() -> None:
    weekdays = parse_cron("0 9 * * mon-fri", "UTC")
    assert weekdays.next_after(utc(2026, 11, 27, 10)) == utc(2026, 11, 30, 9)  # Fri → Mon
    quarter = parse_cron("*/15 * * * *", "UTC")
    assert quarter.next_after(utc(2026, 1, 1, 0, 14, 59)) == utc(2026, 1, 1, 0, 15)
    # Like Celery's crontab, both day fields must match: the 13th that is a Friday.
    friday_13 = parse_cron("0 0 13 * 5", "UTC")
    assert friday_13.next_after(utc(2026, 1, 1)) == utc(2026, 2, 13)


@pytest.mark.parametrize(("cron", "tz", "says"), [
    ("0 7 * *", "UTC", "five fields"),
    ("0 25 * * *", "UTC", r"--cron '0 25 \* \* \*': Invalid end range: 25 > 23;"),
    ("0 7 * * *", "Mars/Olympus", "unknown time zone"),
    ("0 0 30 2 *", "UTC", "never"),
])
def test_bad_lines_are_refused_naming_the_option(cron: str, tz: str, says: str) -> None:
    with pytest.raises(CronError, match=says) as caught:
        parse_cron(cron, tz)
    assert caught.value.exit_code == 2


def test_missed_run_verdicts() -> None:
    now = utc(2026, 11, 30, 7, 0, 30)
    assert decide(now - timedelta(seconds=30), now, 120, "skip") == "on time"
    assert decide(now - timedelta(seconds=121), now, 120, "once") == "catch up"
    assert decide(now - timedelta(days=3), now, 120, "skip") == "skip"


def test_flower_auth_rule() -> None:
    assert check_auth(None, "127.0.0.1") is None
    assert check_auth("ops:pw,ro:pw2", "0.0.0.0") == "ops:pw,ro:pw2"
    with pytest.raises(ConfigError, match="SKILLQ_FLOWER_AUTH=user:password"):
        check_auth(None, "0.0.0.0")
    for bad in ("nocolon-x1", ":pw-x2", "user-x3:", "a:b,broken-x4"):
        with pytest.raises(ConfigError) as caught:
            check_auth(bad, "127.0.0.1")
        assert bad not in str(caught.value)


def test_flower_shows_the_skill_and_ids_never_more() -> None:
    one = Dispatch(("run-1/fan/0/1",), "default", "echo")
    assert readable_args(one) == "echo: run-1/fan/0/1"
    batch = Dispatch(("run-1/fan/0/1", "run-1/fan/1/1", "run-1/fan/2/1"), "default")
    assert readable_args(batch) == "fan: run-1/fan/0/1 (+2 more)"  # no label: the step
