"""The Ask page: `skillq ask` in the browser, on the CLI's own code path
(orchestrator/ask.py), so the two surfaces cannot drift.

- ``GET /ask``: the composer (text, model, Send).
- ``POST /ask/tokens``: the text's slash tokens with their offsets and states, read by
  ``ask.preview`` and so by shared/slash_tokens.py ``resolve``, as `--dry-run`, the
  prompt's estimate and the worker read them. The page paints what this returns and has
  no token grammar of its own: the text comes back cut into segments, so the browser never
  needs the offsets (Python counts code points, JavaScript UTF-16 units).
- ``POST /ask``: ``start_ask(..., triggered_by="dashboard")``; JSON with the run id and
  its stream, or the refusal (empty text, a bad model, no agent worker) with the CLI's
  message: shown on the page, never a 500.
- ``GET /ask/runs/RUN/stream``: the answer as server-sent events (ask_events.py).

Same guard as every page: Host, auth, and for the POSTs the same-origin check and the
form token (sent by the page in the x-skillq-csrf header).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp

from orchestrator.ask import SOURCE, AnswerStream, checked_text, preview, start_ask, states_of
from orchestrator.dashboard.ask_events import AnswerEvents, Held, PendingStreams, Relay
from orchestrator.dashboard.context import Dashboard, dashboard
from orchestrator.dashboard.csrf import submitted_form
from orchestrator.dashboard.run_form import form_values
from shared.db.models import PipelineRun
from shared.errors import NoWorker, SkillqError
from shared.slash_tokens import Token


def pending(request: Request) -> PendingStreams:
    found: PendingStreams = request.app.state.ask_streams
    return found


async def _form(request: Request) -> dict[str, str]:
    limit = dashboard(request).config.max_body_bytes
    return form_values(list((await submitted_form(request, limit)).multi_items()))


def ask_page(request: Request) -> HTMLResponse:
    dash = dashboard(request)
    # A prefill only: an empty field sends no model, and the worker's own default applies.
    return dash.render(request, "ask.html", {"model": dash.conn.settings.agent_model or ""})


def token_json(token: Token) -> dict[str, Any]:
    return {"start": token.start, "end": token.end, "slug": token.slug,
            "written": token.written, "state": str(token.state), "fix": token.fix(),
            "display_shaped": token.display_shaped}


def segments(text: str, tokens: Sequence[Token]) -> list[dict[str, Any]]:
    """``text`` as plain runs and tokens (``token``: the index in ``tokens``), in order."""
    found: list[dict[str, Any]] = []
    last = 0
    for index, token in enumerate(tokens):
        if token.start > last:
            found.append({"text": text[last:token.start], "token": None})
        found.append({"text": text[token.start:token.end], "token": index})
        last = token.end
    if last < len(text):
        found.append({"text": text[last:], "token": None})
    return found


def read_tokens(dash: Dashboard, text: str) -> dict[str, Any]:
    """What the composer shows for ``text``: its tokens, the text as sent, the notes
    `skillq ask` prints, and the first request's token estimate."""
    if not text.strip():  # preview refuses empty text; nothing to paint either
        return {"tokens": [], "segments": segments(text, []), "sent": text, "problems": [],
                "estimate": None}
    vault = dash.vault()
    shown = preview(dash.conn.settings, vault, text, states_of(dash.config.database_url,
                                                               vault))
    resolution = shown.resolution
    return {"tokens": [token_json(t) for t in resolution.tokens],
            "segments": segments(text, resolution.tokens), "sent": resolution.text,
            "problems": resolution.problems(), "estimate": shown.estimate_tokens}


async def tokens_submit(request: Request) -> Response:
    form = await _form(request)
    try:
        found = await run_in_threadpool(read_tokens, dashboard(request), form.get("text", ""))
    except SkillqError as exc:  # e.g. a vault that no longer loads
        return JSONResponse({"error": str(exc)}, status_code=400)
    return JSONResponse(found)


def _refused(message: str, status_code: int = 400) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status_code)


@dataclass(frozen=True)
class Started:
    run_id: str
    held: Held
    problems: list[str]  # the disabled and unknown tokens, with their fixes
    sent: str  # the text as sent: display tokens as slugs


def _start(dash: Dashboard, form: dict[str, str], relay: Relay) -> JSONResponse | Started:
    """As `skillq ask TEXT [--model M]` does: listen first, then start the run, so no
    piece of its answer comes before anyone hears it."""
    text = form.get("text", "")
    model = form.get("model", "").strip() or None
    try:
        checked_text(text)
        vault = dash.vault(fresh=True)  # a skill just made with `skillq new` is offered
        stream = AnswerStream(dash.config.database_url, relay.write)
    except SkillqError as exc:
        return _refused(str(exc))
    except psycopg.Error as exc:
        return _refused(f"the database is unreachable ({exc}); nothing was started", 503)
    try:
        asked = start_ask(dash.conn, vault, text, model=model, triggered_by="dashboard")
    except SkillqError as exc:
        stream.finish(None)
        return _refused(str(exc), 503 if isinstance(exc, NoWorker) else 400)
    except BaseException:
        stream.finish(None)
        raise
    stream.follow(asked.run_id)
    return Started(asked.run_id, Held(stream, relay), asked.resolution.problems(),
                   asked.resolution.text)


async def ask_submit(request: Request) -> Response:
    form = await _form(request)
    relay = Relay(asyncio.get_running_loop())
    started = await run_in_threadpool(_start, dashboard(request), form, relay)
    if isinstance(started, JSONResponse):
        return started
    pending(request).hold(started.run_id, started.held)
    return JSONResponse({
        "run_id": started.run_id, "run_url": f"/runs/{started.run_id}",
        "stream_url": f"/ask/runs/{started.run_id}/stream", "state": "pending",
        "problems": started.problems, "sent": started.sent})


def _is_ask_run(dash: Dashboard, run_id: str) -> bool:
    with dash.db() as session:
        run = session.get(PipelineRun, run_id)
        return run is not None and run.source == SOURCE


async def ask_stream(request: Request) -> ASGIApp:
    dash = dashboard(request)
    run_id = request.path_params["run_id"]
    if not await run_in_threadpool(_is_ask_run, dash, run_id):
        raise HTTPException(404, f"no ask run {run_id}; the Runs page lists the runs")
    return AnswerEvents(dash, run_id, pending(request).take(run_id))


routes = [
    Route("/ask", ask_page, methods=["GET"], name="ask"),
    Route("/ask", ask_submit, methods=["POST"]),
    Route("/ask/tokens", tokens_submit, methods=["POST"]),
    Route("/ask/runs/{run_id}/stream", ask_stream, methods=["GET"]),
]
