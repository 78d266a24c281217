"""A run's end, announced on RUN_DONE_CHANNEL at its final commit: the run's id, then,
when it fits PostgreSQL's payload limit, the run's row as that commit leaves it.

A waiting client (orchestrator/run_end_listener.py) then has the record as it is woken,
without reading it again: one round trip less between a run's end and `skillq run`
printing it. The row is made by the database itself (``row_to_json``), after every
write of the transaction (the NOTIFY is deferred to the commit's pipeline,
shared/db/deferred.py), so it is the committed row, column for column. A row too large
to ride along (a big plan or outputs) is announced by its id alone, and read.

    <run id>                    the run ended; read its row
    <run id>\\n<row as JSON>     the run ended with this row
"""

from __future__ import annotations

import json
from datetime import datetime, tzinfo
from typing import Any

from sqlalchemy import DateTime
from sqlalchemy.orm import Session

from shared.db import deferred
from shared.db.models import PipelineRun

RUN_DONE_CHANNEL = "skillq_run_done"
ROW_MAX_BYTES = 7900  # PostgreSQL refuses a payload of 8000 bytes or more; the id goes too

_ANNOUNCE = ("SELECT pg_notify(%(channel)s::text, CASE WHEN octet_length(row_) <= "
             "%(max)s::int THEN %(run)s::text || chr(10) || row_ ELSE %(run)s::text END) "
             "FROM (SELECT (SELECT row_to_json(r)::text FROM pipeline_runs r "
             "WHERE r.id = %(run)s::text) AS row_) AS ended")
_COLUMNS = {c.name: c for c in PipelineRun.__table__.columns}
_TIMES = frozenset(name for name, c in _COLUMNS.items() if isinstance(c.type, DateTime))


def announce(session: Session, run_id: str) -> None:
    """NOTIFY the run's end with its row, sent with the transaction's COMMIT."""
    deferred.defer(session, _ANNOUNCE, {"channel": RUN_DONE_CHANNEL, "run": run_id,
                                        "max": ROW_MAX_BYTES})


def run_of(payload: str) -> str:
    """The id of the run a notice announces."""
    return payload.partition("\n")[0]


def record_of(payload: str, timezone: tzinfo) -> PipelineRun | None:
    """The ended run's record a notice carries (outside any session, as a read of it on
    a connection whose time zone is ``timezone`` gives it); None when it carries none,
    or a row this client's model does not match (a newer or older schema): read it."""
    _, _, text = payload.partition("\n")
    if not text:
        return None
    try:
        row: dict[str, Any] = json.loads(text)
    except ValueError:
        return None
    if row.keys() != _COLUMNS.keys():
        return None
    for name in _TIMES:
        value = row[name]
        if isinstance(value, str):
            row[name] = datetime.fromisoformat(value).astimezone(timezone)
    return PipelineRun(**row)
