"""Schedules: cron lines that start skill runs, fired by `skillq beat` (docs/schedules.md)."""
