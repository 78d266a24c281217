"""What one of an eval's runs cost, and whether its budget cap cut it short: read the
same way for a skill's runs, its judges' and checkers', and a trigger eval's routers."""

from __future__ import annotations

from sqlalchemy import select

from lifecycle.run_costs import Usage, run_usage
from orchestrator.connect import Connection
from shared.db.models import StepRun
from shared.db.session import transaction

BUDGET_KIND = "budget"  # an agent step's error_kind when its cap stopped it


def usage_of(conn: Connection, run_id: str) -> Usage:
    with transaction(conn.endpoints.database_url) as session:
        return run_usage(session, [run_id]).get(run_id, Usage())


def cut_by_budget(conn: Connection, run_id: str) -> bool:
    """Whether a budget cap stopped one of the run's steps: where an eval's budget ended,
    not a failure of what ran."""
    with transaction(conn.endpoints.database_url) as session:
        return session.scalar(select(StepRun.id).where(
            StepRun.run_id == run_id, StepRun.error_kind == BUDGET_KIND).limit(1)) is not None


def plus(a: Usage, b: Usage) -> Usage:
    return Usage(a.cost_usd + b.cost_usd, a.tokens_in + b.tokens_in,
                 a.tokens_out + b.tokens_out)
