"""The local API's routes (JSON in, JSON out) behind its guard (guard.py).

    POST /v1/runs                 submit, as `skillq run` does: {"run_id"}
    GET  /v1/runs/{id}?after=T&wait_s=N
                                  long-poll: progress once it differs from token T, or
                                  the end (with the --json object and the lines printed)
    POST /v1/runs/{id}/cancel     {"reason"}: as `skillq cancel`, and the run afterwards
    GET  /v1/runs/{id}/waits      {"waits"}: its open questions and approvals
    POST /v1/runs/{id}/waits/{wait}/answer|approve|reject
                                  {"text"|"choice"}, {"inputs"}, {"reason"}: as `skillq
                                  answer`, `approve`, `reject` (cli/inline_answers.py)

A SkillqError is {"error", "exit_code"} with a 4xx status: the client prints
``error: <error>`` and exits with that code, as the command would have. A server that
does not answer (runs.ServerDown) is a 503 that also says which ("outage": "database" or
"broker"), the server's own first line ("detail") and this API's
SKILLQ_DATABASE_OUTAGE_S ("outage_s"): the client waits, or takes the direct path
(orchestrator/cli/run_client.py). Only a bug is a 500, its traceback in the log.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from orchestrator.api import runs, waits
from orchestrator.api.guard import ApiGuard, refusal
from orchestrator.api.run_ends import RunEnds
from orchestrator.connect import Connection
from shared.errors import NotFound, SkillqError

log = logging.getLogger(__name__)
BODY_SLACK_BYTES = 64 * 1024


def answer(data: Any, status_code: int = 200) -> Response:
    # json.dumps as `skillq run --json` prints (NaN allowed, non-ASCII kept), not
    # JSONResponse's stricter encoder: the client prints what it gets back unchanged.
    return Response(json.dumps(data, ensure_ascii=False), status_code,
                    media_type="application/json")


def create_app(conn: Connection, ends: RunEnds, token: str, port: int) -> Starlette:
    async def submit(request: Request) -> Response:
        req = runs.RunRequest.parse(await _body(request))
        return answer({"run_id": await run_in_threadpool(runs.submit, conn, req)}, 201)

    async def follow(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        after = request.query_params.get("after")
        try:
            wait_s = float(request.query_params.get("wait_s", "0"))
        except ValueError:
            raise runs.BadRequest("wait_s must be a number of seconds") from None
        return answer(await run_in_threadpool(runs.poll, conn, ends, run_id, after, wait_s))

    async def cancel(request: Request) -> Response:
        body = await _body(request)
        reason = runs.reason_of(body if isinstance(body, dict) else {})
        return answer(await run_in_threadpool(runs.cancel, conn,
                                              request.path_params["run_id"], reason))

    async def open_waits(request: Request) -> Response:
        return answer(await run_in_threadpool(waits.open_waits, conn,
                                              request.path_params["run_id"]))

    async def decide(request: Request) -> Response:
        p = request.path_params
        return answer(await run_in_threadpool(waits.decide, conn, p["run_id"], p["wait_id"],
                                              p["decision"], await _body(request)))

    max_body = 8 * conn.settings.input_max_bytes + BODY_SLACK_BYTES  # as the dashboard's
    return Starlette(
        routes=[Route("/v1/runs", submit, methods=["POST"]),
                Route("/v1/runs/{run_id}", follow, methods=["GET"]),
                Route("/v1/runs/{run_id}/cancel", cancel, methods=["POST"]),
                Route("/v1/runs/{run_id}/waits", open_waits, methods=["GET"]),
                Route("/v1/runs/{run_id}/waits/{wait_id:int}/{decision}", decide,
                      methods=["POST"])],
        middleware=[Middleware(ApiGuard, token=token, port=port, max_body_bytes=max_body)],
        exception_handlers={SkillqError: _skillq_error, runs.ServerDown: _server_down,
                            Exception: _failure})


async def _body(request: Request) -> Any:
    try:
        return json.loads(await request.body())
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise runs.BadRequest("the body must be JSON") from None


async def _skillq_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, SkillqError)
    status = 404 if isinstance(exc, NotFound) else 400
    return refusal(status, str(exc), exc.exit_code)


async def _server_down(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, runs.ServerDown)
    return answer({"error": str(exc), "exit_code": exc.exit_code, "outage": exc.server,
                   "detail": exc.detail, "outage_s": exc.bound_s}, 503)


async def _failure(request: Request, exc: Exception) -> Response:
    log.exception("the local API failed on %s %s", request.method, request.url.path)
    return refusal(500, f"the local API failed ({type(exc).__name__}); its log "
                   "(SKILLQ_HOME/logs/api.log under `skillq up`) has the traceback", 1)
