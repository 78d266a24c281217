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

from shared.db import deferred

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


_ADD_TEMPLATE = (
    "INSERT INTO skill_stats AS s (skill, kind, runs, successes, duration_ms_sum, "
    "duration_n, cost_usd_sum, last_run, prod_runs, prod_successes) "
    "VALUES (%(skill)s, %(kind)s, %(runs)s, %(successes)s, %(duration_ms_sum)s, "
    "%(duration_n)s, {cost}, %(last_run)s, %(prod_runs)s, %(prod_successes)s) "
    "ON CONFLICT (skill, kind) DO UPDATE SET runs = s.runs + excluded.runs, "
    "successes = s.successes + excluded.successes, "
    "duration_ms_sum = s.duration_ms_sum + excluded.duration_ms_sum, "
    "duration_n = s.duration_n + excluded.duration_n, "
    "cost_usd_sum = s.cost_usd_sum + excluded.cost_usd_sum, "
    "last_run = greatest(s.last_run, excluded.last_run), "
    "prod_runs = s.prod_runs + excluded.prod_runs, "
    "prod_successes = s.prod_successes + excluded.prod_successes")
_ADD = _ADD_TEMPLATE.format(cost="%(cost_usd_sum)s")
# A run's cost as lifecycle/run_costs.py sums it without nested runs (each step item as
# its costliest attempt), at the commit: after every write of the transaction.
_ADD_RUN = _ADD_TEMPLATE.format(cost=(
    "(SELECT coalesce(sum(c), 0) FROM (SELECT max(cost_usd) AS c FROM step_runs "
    "WHERE run_id = %(run_id)s GROUP BY step_id, item_index) AS items)"))
_READ = text("SELECT * FROM skill_stats WHERE skill = :skill AND kind = :kind")


def add(session: Session, skill: str, kind: str, totals: Totals) -> None:
    """Add ``totals`` at this transaction's commit (shared/db/deferred.py): nothing in
    the transaction reads them back, and the row's lock is then held for the commit
    alone."""
    if totals.runs:
        deferred.defer(session, _ADD, {"skill": skill, "kind": kind, **totals.__dict__})


def add_run(session: Session, skill: str, totals: Totals, run_id: str) -> None:
    """As ``add`` for one ended pipeline run with no nested runs, its cost summed from
    its step items by the database at the commit (no read for it before; ``totals``'s
    own cost is not used)."""
    if totals.runs:
        deferred.defer(session, _ADD_RUN, {"skill": skill, "kind": PIPELINE,
                                           **totals.__dict__, "run_id": run_id})


def read(session: Session, skill: str, kind: str) -> dict[str, Any]:
    """benchmarks.json's aggregates for ``skill``."""
    row = session.execute(_READ, {"skill": skill, "kind": kind}).first()
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
