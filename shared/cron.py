"""Cron lines read in a time zone: parsing (Celery's crontab) and the next due time.

Celery's ``crontab`` parses the five fields (ranges, steps, names such as ``mon``), so a
line means what it means to a Celery beat user; like Celery, all five fields must match
(a line restricting both day of month and day of week needs both). Times are wall-clock
times in the schedule's zone: "0 7 * * *" in Europe/Paris is 07:00 in Paris in winter
and in summer. A wall time that does not exist (the spring-forward hour) fires at the
instant it maps to; a wall time that happens twice (the fall-back hour) fires once, at
its first occurrence.

The nicknames Vixie cron and Airflow accept (``@hourly``, ``@daily``, ...) stand for their
five-field lines; a schedule keeps the nickname as written, so `skillq schedule list`
shows what the user typed. ``@reboot`` has no due time, so it is refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from celery.schedules import crontab

from shared.errors import CronError

MAX_YEARS = 5  # "0 0 30 2 *" never matches: give up looking after this long

ALIASES = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
           "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *",
           "@hourly": "0 * * * *"}


@dataclass(frozen=True)
class CronLine:
    text: str
    tz: str
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # cron numbering: 0 = Sunday

    def matches_day(self, day: date) -> bool:
        return (day.month in self.months and day.day in self.days
                and (day.weekday() + 1) % 7 in self.weekdays)

    def next_after(self, after: datetime) -> datetime:
        """The first due instant strictly after ``after`` (aware), in UTC."""
        zone = ZoneInfo(self.tz)
        local = after.astimezone(zone)
        day = local.date()
        for _ in range(366 * MAX_YEARS):
            if self.matches_day(day):
                for hour in self.hours:
                    for minute in self.minutes:
                        wall = datetime.combine(day, time(hour, minute), tzinfo=zone)
                        due = wall.astimezone(UTC)
                        if due > after:
                            return due
            day += timedelta(days=1)
        raise CronError(f"cron line '{self.text}' never matches in {MAX_YEARS} years")


def parse_cron(text: str, tz: str) -> CronLine:
    """A checked cron line; CronError naming the field and the fix otherwise."""
    try:
        ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise CronError(f"--tz '{tz}': unknown time zone; give an IANA name such as "
                        "Europe/Paris or UTC") from exc
    written = " ".join(text.split())
    if written.startswith("@"):
        written = written.lower()
        if written == "@reboot":
            raise CronError(f"--cron '{text}': beat fires schedules at times, not at "
                            "start-up; use a time, e.g. @daily or \"0 7 * * *\"")
        if written not in ALIASES:
            raise CronError(f"--cron '{text}': unknown nickname; use one of "
                            f"{', '.join(ALIASES)}, or five fields such as \"0 7 * * *\"")
    fields = ALIASES.get(written, written).split()
    if len(fields) != 5:
        raise CronError(f"--cron '{text}': a cron line has five fields (minute hour "
                        "day-of-month month day-of-week), e.g. \"0 7 * * *\", or a "
                        f"nickname ({', '.join(ALIASES)})")
    try:
        spec = crontab.from_string(" ".join(fields))
    except ValueError as exc:
        why = str(exc).rstrip(".")
        raise CronError(f"--cron '{text}': {why}; fields are minute (0-59) hour (0-23) "
                        "day-of-month (1-31) month (1-12) day-of-week (0-6 or sun-sat)"
                        ) from exc
    line = CronLine(text=written, tz=tz, minutes=tuple(sorted(_field(spec, "minute"))),
                    hours=tuple(sorted(_field(spec, "hour"))),
                    days=_field(spec, "day_of_month"), months=_field(spec, "month_of_year"),
                    weekdays=_field(spec, "day_of_week"))
    line.next_after(datetime.now(UTC))  # a line that never fires is refused now
    return line


def _field(spec: crontab, name: str) -> frozenset[int]:
    """One expanded field (the type stubs do not declare crontab's attributes)."""
    return frozenset(int(v) for v in vars(spec)[name])
