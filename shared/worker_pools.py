"""How a worker runs its steps (`skillq worker --pool`). Standard library only: the thin
CLI imports it."""

from __future__ import annotations

from enum import StrEnum


class WorkerPool(StrEnum):
    PREFORK = "prefork"  # pool processes: a step's crash takes one of them, not the worker
    THREADS = "threads"  # in the worker's own process: one process where concurrency is 1
