"""The skill page's "Try it" panel: `skillq try NAME "request"` in the browser, on the
CLI's own code path (orchestrator/try_session.py, orchestrator/waits.py), answering JSON
to the panel's script (templates/try_panel.html):

- ``POST /skills/NAME/try``: ``request``, and ``earlier`` (the exchanges so far, JSON:
  try_views.py); ``start_try(..., triggered_by="dashboard")``; the run id and its URLs, or
  the refusal (an empty request, no agent worker, a skill not in the vault) with the
  CLI's message: shown on the page, never a 500.
- ``GET /skills/NAME/try/RUN/stream``: the answer as server-sent events, as the Ask
  page's (ask_events.py): the worker streams a try run's answer as an ask's.
- ``GET /skills/NAME/try/RUN``: the request's calls of the skill, its open questions,
  and its end (try_views.py ``progress``), which the panel polls while it runs.
- ``POST /skills/NAME/try/RUN/answer``: ``wait`` (the question's number), and ``choice``
  (from 1) or ``text``; the question answered as `skillq answer` answers it.

Same guard as every page: Host, auth, and for the POSTs the same-origin check and the
form token (sent by the script in the x-skillq-csrf header).
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict

import psycopg
from sqlalchemy.exc import SQLAlchemyError
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp

from orchestrator import waits
from orchestrator.ask import AnswerStream
from orchestrator.dashboard.ask_events import AnswerEvents, Held, Relay
from orchestrator.dashboard.context import Dashboard, dashboard
from orchestrator.dashboard.csrf import submitted_form
from orchestrator.dashboard.pages_ask import pending
from orchestrator.dashboard.run_form import form_values
from orchestrator.dashboard.try_views import EARLIER, parse_earlier, progress, try_run
from orchestrator.dashboard.wait_views import decided_by
from orchestrator.try_session import start_try
from shared.errors import NotFound, NoWorker, SkillqError, WaitError

OUTAGE = "the database is unreachable ({}); try again in a moment"


def _refused(exc: SkillqError | str, status_code: int = 400) -> JSONResponse:
    if isinstance(exc, SkillqError):
        status_code = 404 if isinstance(exc, NotFound) else \
            503 if isinstance(exc, NoWorker) else status_code
    return JSONResponse({"error": str(exc)}, status_code=status_code)


async def _form(request: Request) -> dict[str, str]:
    limit = dashboard(request).config.max_body_bytes
    return form_values(list((await submitted_form(request, limit)).multi_items()))


def _start(dash: Dashboard, name: str, form: dict[str, str],
           relay: Relay) -> JSONResponse | tuple[str, Held]:
    """As `skillq try` does: listen first, then start the run, so no piece of its answer
    comes before anyone hears it."""
    try:
        earlier = parse_earlier(form.get(EARLIER, ""))
        vault = dash.vault(fresh=True)  # the skill's folder as it stands now
        stream = AnswerStream(dash.config.database_url, relay.write)
    except SkillqError as exc:
        return _refused(exc)
    except psycopg.Error as exc:
        return _refused(f"the database is unreachable ({exc}); nothing was started", 503)
    try:
        run_id = start_try(dash.conn, vault, name, form.get("request", ""), earlier,
                           triggered_by="dashboard")
    except SkillqError as exc:
        stream.finish(None)
        return _refused(exc)
    except BaseException:
        stream.finish(None)
        raise
    stream.follow(run_id)
    return run_id, Held(stream, relay)


async def try_submit(request: Request) -> Response:
    name = request.path_params["name"]
    form = await _form(request)
    relay = Relay(asyncio.get_running_loop())
    started = await run_in_threadpool(_start, dashboard(request), name, form, relay)
    if isinstance(started, JSONResponse):
        return started
    run_id, held = started
    pending(request).hold(run_id, held)  # until the panel's stream request takes it
    base = f"/skills/{name}/try/{run_id}"
    return JSONResponse({"run_id": run_id, "run_url": f"/runs/{run_id}", "state": "pending",
                         "stream_url": f"{base}/stream", "progress_url": base,
                         "answer_url": f"{base}/answer"})


def _progress(dash: Dashboard, name: str, run_id: str) -> JSONResponse:
    try:
        return JSONResponse(progress(dash, name, run_id))
    except SkillqError as exc:  # not this skill's request; the database away too long
        return _refused(exc, 503)
    except SQLAlchemyError as exc:  # the run goes on; the panel looks again
        return _refused(OUTAGE.format(exc), 503)


async def try_progress(request: Request) -> Response:
    return await run_in_threadpool(_progress, dashboard(request), request.path_params["name"],
                                   request.path_params["run_id"])


def _is_try(dash: Dashboard, name: str, run_id: str) -> JSONResponse | None:
    try:
        try_run(dash, name, run_id)
    except SkillqError as exc:
        return _refused(exc)
    except SQLAlchemyError as exc:
        return _refused(OUTAGE.format(exc), 503)
    return None


async def try_stream(request: Request) -> ASGIApp:
    dash = dashboard(request)
    name, run_id = request.path_params["name"], request.path_params["run_id"]
    refused = await run_in_threadpool(_is_try, dash, name, run_id)
    if refused is not None:
        return refused
    return AnswerEvents(dash, run_id, pending(request).take(run_id))


def _answer(dash: Dashboard, name: str, run_id: str, form: dict[str, str]) -> JSONResponse:
    text, choice = form.get("text", ""), form.get("choice", "").strip()
    wait = form.get("wait", "").strip().removeprefix("#")
    try:
        try_run(dash, name, run_id)  # only this session's questions are answered here
        if not wait.isdigit():
            raise WaitError(f"wait '{wait}' is no question's number: give the #number "
                            "the panel shows")
        if choice and text.strip():
            raise WaitError("give the answer as text or as a choice, not both")
        if choice and not choice.isdigit():
            raise WaitError(f"choice '{choice}' is no number: give the choice's number, "
                            "from 1")
        done = waits.answer(dash.conn, run_id, f"#{wait}", text=None if choice else text,
                            choice=int(choice) if choice else None, by=decided_by(dash))
    except SkillqError as exc:
        return _refused(exc)
    except SQLAlchemyError as exc:
        return _refused(OUTAGE.format(exc) + "; nothing was answered", 503)
    return JSONResponse(asdict(done))


async def answer_submit(request: Request) -> Response:
    form = await _form(request)
    return await run_in_threadpool(_answer, dashboard(request), request.path_params["name"],
                                   request.path_params["run_id"], form)


routes = [
    Route("/skills/{name}/try", try_submit, methods=["POST"]),
    Route("/skills/{name}/try/{run_id}", try_progress, methods=["GET"]),
    Route("/skills/{name}/try/{run_id}/stream", try_stream, methods=["GET"]),
    Route("/skills/{name}/try/{run_id}/answer", answer_submit, methods=["POST"]),
]
