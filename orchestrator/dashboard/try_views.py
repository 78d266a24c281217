"""What the skill page's "Try it" panel reads (orchestrator/try_session.py, as `skillq try
NAME "request"` does): the conversation the page sends back with each request, which run
is a request of which skill's session, and a request's progress as JSON.

The conversation lives in the page only: each request carries the exchanges before it
(``earlier``, a JSON list of ``{"request", "answer"}``), as the CLI's session keeps them.
"""

from __future__ import annotations

import json
from typing import Any

from orchestrator import waits
from orchestrator.dashboard.context import Dashboard
from orchestrator.try_session import Call, Exchange, calls_of
from shared.builtin import TRY
from shared.db.models import PipelineRun
from shared.errors import InputError, NotFound
from shared.problems import Problem
from shared.skillfiles import RunSource
from shared.states import RunState
from shared.store import unpack

EARLIER = "earlier"  # the form field of the exchanges so far


class NotATry(NotFound):
    def __init__(self, name: str, run_id: str) -> None:
        super().__init__(f"run {run_id} is no request of a try session of {name}; the "
                         f"skill page's Try it panel starts them")


def parse_earlier(text: str) -> list[Exchange]:
    """The exchanges the page sent back (InputError, naming the field, when they are not
    a list of ``{"request": TEXT, "answer": TEXT}``)."""
    if not text.strip():
        return []
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise _bad(f"not JSON ({exc})") from None
    if not isinstance(data, list):
        raise _bad("give a list of {\"request\", \"answer\"} objects")
    found = []
    for index, item in enumerate(data):
        request = item.get("request") if isinstance(item, dict) else None
        answer = item.get("answer") if isinstance(item, dict) else None
        if not isinstance(request, str) or not isinstance(answer, str):
            raise _bad(f"item {index} is no {{\"request\": TEXT, \"answer\": TEXT}}")
        found.append(Exchange(request, answer))
    return found


def _bad(message: str) -> InputError:
    return InputError([Problem("the Try it panel", EARLIER, message)])


def try_run(dash: Dashboard, name: str, run_id: str) -> dict[str, Any]:
    """Run ``run_id``'s state, error and answer (when it has one), checked to be a
    request of ``name``'s session (NotATry otherwise)."""
    with dash.db() as session:
        run = session.get(PipelineRun, run_id)
        inputs = None if run is None else unpack(session, run.inputs or {})
        if (run is None or run.skill != TRY or run.source != RunSource.TEST_WINDOW.value
                or not isinstance(inputs, dict) or inputs.get("skill") != name):
            raise NotATry(name, run_id)
        outputs = None if run.outputs is None else unpack(session, run.outputs)
        answer = outputs.get("answer") if isinstance(outputs, dict) else None
        state = str(run.state)
        return {"run_id": run_id, "state": state, "ended": RunState(state).terminal,
                "error": run.error, "answer": answer if isinstance(answer, str) else None}


def call_json(call: Call) -> dict[str, Any]:
    return {"run_id": call.run_id, "run_url": f"/runs/{call.run_id}", "skill": call.skill,
            "state": call.state, "inputs": call.inputs, "error": call.error}


def progress(dash: Dashboard, name: str, run_id: str) -> dict[str, Any]:
    """A request as the panel shows it while it runs: its calls of the skill (oldest
    first), its open questions (`skillq inbox RUN --json`'s), and its end."""
    found = try_run(dash, name, run_id)
    found["calls"] = [call_json(c) for c in calls_of(dash.conn, run_id)]
    found["questions"] = [w.as_json() for w in waits.inbox(dash.conn, run_id)
                          if w.kind == "question"]
    return found
