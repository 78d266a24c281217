"""What a beat tick does with the schedules that are due: decide, claim, start the runs.

Deciding and claiming happen in one transaction (the rows locked): each due schedule's
``next_due_at`` moves to its next time after now before any run starts, so a crash
between the claim and the start loses that occurrence rather than running it twice
(at most once per occurrence; the lock in lock.py makes sure only one beat claims).

Missed occurrences (beat was down, or the machine slept): a schedule due longer ago than
``grace_s`` was missed. With ``catch_up="once"`` it runs once now, however many
occurrences passed; with ``"skip"`` it waits for its next time. Either way the next due
time is the cron line's first after now.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from sqlalchemy.orm import Session

from orchestrator.connect import Connection
from orchestrator.launch import start_run
from orchestrator.schedules.records import due_schedules
from shared.cron import parse_cron
from shared.db.schedule_models import Schedule
from shared.db.session import transaction
from shared.errors import SkillqError
from shared.vault import open_vault

log = logging.getLogger("skillq.beat")

Verdict = Literal["on time", "catch up", "skip"]


def decide(due_at: datetime, now: datetime, grace_s: float, catch_up: str) -> Verdict:
    if (now - due_at).total_seconds() <= grace_s:
        return "on time"
    return "catch up" if catch_up == "once" else "skip"


def triggered_by(schedule_id: int) -> str:
    """What ``pipeline_runs.triggered_by`` says of a run a schedule started."""
    return f"schedule:{schedule_id}"


@dataclass(frozen=True)
class Firing:
    schedule_id: int
    skill: str
    inputs: dict[str, Any]
    vault: str
    workdir: str
    due_at: datetime
    verdict: Verdict


def claim_due(session: Session, now: datetime, grace_s: float) -> list[Firing]:
    """Move every due schedule on to its next time; the ones to start now."""
    firings = []
    for row in due_schedules(session, now):
        verdict = decide(row.next_due_at, now, grace_s, row.catch_up)
        due_at = row.next_due_at
        row.last_due_at = due_at
        row.next_due_at = parse_cron(row.cron, row.tz).next_after(now)
        row.last_error = None
        if verdict == "skip":
            row.last_outcome = "skipped"
            log.info("schedule %s (%s): missed its %s run (--catch-up skip); next at %s",
                     row.id, row.skill, f"{due_at:%Y-%m-%d %H:%M %Z}", row.next_due_at)
            continue
        row.last_outcome = "starting"  # stays so only if beat died before the run started
        firings.append(Firing(row.id, row.skill, dict(row.inputs), row.vault, row.workdir,
                              due_at, verdict))
    return firings


def start_firing(conn: Connection, firing: Firing, discovery_ttl_s: float) -> None:
    """Start the run (the first planning happens here, as for `skillq run`) and record
    the outcome on the schedule; a run that cannot start is recorded, never raised."""
    run_id: str | None = None
    error: str | None = None
    try:
        vault = open_vault(Path(firing.vault), ttl_s=discovery_ttl_s)
        run_id = start_run(conn, vault, vault.get(firing.skill), firing.inputs,
                           source="production", triggered_by=triggered_by(firing.schedule_id),
                           workdir=firing.workdir)
    except SkillqError as exc:
        error = str(exc)
    except Exception as exc:  # the broker or database down: recorded, beat goes on
        log.exception("schedule %s: starting its run failed", firing.schedule_id)
        error = f"{type(exc).__name__}: {exc}"
    with transaction(conn.endpoints.database_url) as session:
        row = session.get(Schedule, firing.schedule_id)
        if row is not None and row.last_due_at == firing.due_at:
            row.last_outcome = "error" if error else (
                "caught up" if firing.verdict == "catch up" else "started")
            row.last_run_id = run_id or row.last_run_id
            row.last_error = error
    if error:
        log.error("schedule %s (%s): the run did not start: %s", firing.schedule_id,
                  firing.skill, error)
    else:
        log.info("schedule %s (%s) due %s (%s): run %s started", firing.schedule_id,
                 firing.skill, f"{firing.due_at:%Y-%m-%d %H:%M:%S %Z}", firing.verdict,
                 run_id)
