"""A figure: one row of the results, skillq beside its raw-Celery floor."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Figure:
    key: str
    name: str
    skillq: float | None
    raw: float | None
    unit: str
    ratio: float | None
    target: str = ""
    passed: bool | None = None  # None: informational
    note: str = ""
    samples: dict[str, Any] = field(default_factory=dict)


def med(values: Sequence[float]) -> float:
    return float(statistics.median(values))
