"""The local API's side of a run's waits, for an attended `skillq run` that follows it
through the API (cli/inline_answers.py): the open ones, and a decision on one."""

from __future__ import annotations

from typing import Any

from orchestrator import waits
from orchestrator.api.runs import BadRequest
from orchestrator.connect import Connection
from orchestrator.publish import who

DECISIONS = ("answer", "approve", "reject")


def open_waits(conn: Connection, run_id: str) -> dict[str, Any]:
    return {"waits": [w.as_json() for w in waits.inbox(conn, run_id)]}


def decide(conn: Connection, run_id: str, wait_id: str, decision: str,
           body: Any) -> dict[str, Any]:
    if decision not in DECISIONS or not isinstance(body, dict):
        raise BadRequest(f"POST /v1/runs/RUN/waits/ID/{{{','.join(DECISIONS)}}} with a "
                         "JSON object")
    which, by = f"#{wait_id}", f"terminal:{who()}"
    if decision == "answer":
        choice = body.get("choice")
        done = waits.answer(conn, run_id, which, text=body.get("text"),
                            choice=int(choice) if isinstance(choice, int) else None, by=by)
    elif decision == "approve":
        given = body.get("inputs")
        done = waits.approve(conn, run_id, which,
                             given=given if isinstance(given, dict) else {}, by=by)
    else:
        done = waits.reject(conn, run_id, which, reason=str(body.get("reason") or ""), by=by)
    return {"wait_id": done.wait_id, "state": done.state, "value": done.value}
