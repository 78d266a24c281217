"""Celery tasks of the data plane (registered on whichever app the process created)."""

from __future__ import annotations

from celery import shared_task


@shared_task(name="skillq.ping")
def ping() -> str:
    return "pong"
