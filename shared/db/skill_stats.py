"""Running totals per skill (the ``skill_stats`` table): added to as attempts and runs
end, read by benchmarks.json, rebuilt from the records after an import.

``runs`` counts every settled run whatever its source; the success rate is over
production runs only (``prod_runs``, ``prod_successes``): a test case meant to fail is
a passed test, not a failed run, and its verdict lives in test_results.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import text
from sqlalchemy.orm import Session

STEP = "step"
PIPELINE = "pipeline"


@dataclass
class Totals:
    runs: int = 0
    successes: int = 0
    duration_ms_sum: float = 0.0
    duration_n: int = 0
    cost_usd_sum: float = 0.0
    last_run: datetime | None = None
    prod_runs: int = 0
    prod_successes: int = 0

    def add(self, *, success: bool, duration_ms: float | None, cost_usd: float,
            at: datetime, production: bool) -> None:
        self.runs += 1
        self.successes += int(success)
        if production:
            self.prod_runs += 1
            self.prod_successes += int(success)
        if duration_ms is not None:
            self.duration_ms_sum += duration_ms
            self.duration_n += 1
        self.cost_usd_sum += cost_usd
        self.last_run = at if self.last_run is None else max(self.last_run, at)


_ADD = text(
    "INSERT INTO skill_stats AS s (skill, kind, runs, successes, duration_ms_sum, "
    "duration_n, cost_usd_sum, last_run, prod_runs, prod_successes) "
    "VALUES (:skill, :kind, :runs, :successes, "
    ":duration_ms_sum, :duration_n, :cost_usd_sum, :last_run, :prod_runs, :prod_successes) "
    "ON CONFLICT (skill, kind) DO UPDATE SET runs = s.runs + excluded.runs, "
    "successes = s.successes + excluded.successes, "
    "duration_ms_sum = s.duration_ms_sum + excluded.duration_ms_sum, "
    "duration_n = s.duration_n + excluded.duration_n, "
    "cost_usd_sum = s.cost_usd_sum + excluded.cost_usd_sum, "
    "last_run = greatest(s.last_run, excluded.last_run), "
    "prod_runs = s.prod_runs + excluded.prod_runs, "
    "prod_successes = s.prod_successes + excluded.prod_successes RETURNING *")
_READ = text("SELECT * FROM skill_stats WHERE skill = :skill AND kind = :kind")
# session.info: (skill, kind) -> the row as this transaction's last add left it. The add
# locked that row until the commit, so a read later in the transaction would see just it.
_ADDED = "skillq.skill_stats_added"


def add(session: Session, skill: str, kind: str, totals: Totals) -> None:
    if totals.runs:
        row = session.execute(_ADD, {"skill": skill, "kind": kind, **totals.__dict__}).one()
        session.info.setdefault(_ADDED, {})[(skill, kind)] = row


def read(session: Session, skill: str, kind: str) -> dict[str, Any]:
    """benchmarks.json's aggregates for ``skill``."""
    row = session.info.get(_ADDED, {}).get((skill, kind)) or session.execute(
        _READ, {"skill": skill, "kind": kind}).first()
    if row is None or not row.runs:
        return {"total_runs": 0, "success_rate": None, "avg_duration_ms": None,
                "avg_cost_usd": None, "last_run": None}
    return {"total_runs": int(row.runs),
            "success_rate": round(row.prod_successes / row.prod_runs, 4)
            if row.prod_runs else None,
            "avg_duration_ms": round(row.duration_ms_sum / row.duration_n, 1)
            if row.duration_n else None,
            "avg_cost_usd": round(row.cost_usd_sum / row.runs, 6),
            "last_run": row.last_run}


def rebuild(session: Session, skills: Iterable[str]) -> None:
    """Recount these skills' totals from their records (after rows were imported)."""
    names = sorted(set(skills))
    if not names:
        return
    added = session.info.get(_ADDED, {})
    for key in [k for k in added if k[0] in names]:
        del added[key]
    session.execute(text("DELETE FROM skill_stats WHERE skill = ANY(:names)"),
                    {"names": names})
    session.execute(text(
        "INSERT INTO skill_stats (skill, kind, runs, successes, duration_ms_sum, duration_n, "
        "cost_usd_sum, last_run, prod_runs, prod_successes) SELECT skill, 'step', count(*), "
        "count(*) FILTER (WHERE state = 'succeeded'), coalesce(sum(duration_ms), 0), "
        "count(duration_ms), coalesce(sum(cost_usd), 0), max(finished_at), "
        "count(*) FILTER (WHERE source = 'production'), "
        "count(*) FILTER (WHERE source = 'production' AND state = 'succeeded') FROM step_runs "
        "WHERE skill = ANY(:names) AND state IN ('succeeded', 'failed', 'skipped') "
        "GROUP BY skill"), {"names": names})
    session.execute(text(
        "INSERT INTO skill_stats (skill, kind, runs, successes, duration_ms_sum, duration_n, "
        "cost_usd_sum, last_run, prod_runs, prod_successes) SELECT skill, 'pipeline', count(*), "
        "count(*) FILTER (WHERE state = 'succeeded'), "
        "coalesce(sum(extract(epoch FROM finished_at - started_at) * 1000), 0), "
        "count(finished_at - started_at), 0, max(finished_at), "
        "count(*) FILTER (WHERE source = 'production'), "
        "count(*) FILTER (WHERE source = 'production' AND state = 'succeeded') "
        "FROM pipeline_runs "
        "WHERE skill = ANY(:names) AND state IN ('succeeded', 'failed') GROUP BY skill"),
        {"names": names})
