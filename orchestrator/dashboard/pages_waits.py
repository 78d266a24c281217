"""A person's side of a waiting run in the browser, on the CLI's code path
(orchestrator/waits.py, which `skillq inbox`, `answer`, `approve` and `reject` call):

- ``GET /inbox``: every open question and approval across runs, oldest first.
- ``POST /runs/RUN/answer``: ``wait`` (its number, or its step: needed only when the run
  has several open), and ``choice`` (from 1) or ``text``.
- ``POST /runs/RUN/approve``: ``wait``, and ``input.NAME`` for each approval input
  (an empty or missing field takes its default).
- ``POST /runs/RUN/reject``: ``wait``, ``reason``.

The fields are form-encoded, as every form of the dashboard posts them, with its token
(the page's hidden field, or the x-skillq-csrf header with the cookie). A decision
redirects (303) to the run's page; a refusal (a bad answer, nothing open, decided
meanwhile) is that page again with the message, status 400, and decides nothing. With
``Accept: application/json`` each answers JSON instead: the inbox as `skillq inbox
--json`, a decision as `--json` prints it, a refusal as ``{"error": ...}``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from lifecycle.waits import find_open, form_manifest
from orchestrator import waits
from orchestrator.dashboard.context import Dashboard, dashboard
from orchestrator.dashboard.csrf import submitted_form
from orchestrator.dashboard.pages_runs import run_page
from orchestrator.dashboard.run_form import form_values
from orchestrator.dashboard.wait_views import INPUT_PREFIX, decided_by
from shared.db.models import PipelineRun
from shared.db.wait_models import APPROVAL
from shared.errors import InputError, RunNotFound, SkillqError, WaitError
from shared.inputs import parse_cli_inputs

JSON = "application/json"


def wants_json(request: Request) -> bool:
    """A script's request: it asks for JSON, and not for a page (a browser's Accept
    names text/html)."""
    accept = request.headers.get("accept", "")
    return JSON in accept and "text/html" not in accept


def inbox_page(request: Request) -> Response:
    dash = dashboard(request)
    found = waits.inbox(dash.conn)
    if wants_json(request):
        return JSONResponse([w.as_json() for w in found])
    return dash.render(request, "inbox.html", {"waiting": found})


Decide = Callable[[Request, dict[str, str]], Response]


async def _submitted(request: Request, decide: Decide) -> Response:
    # The guard reads the form token from a form body or the header; a JSON body would
    # arrive as an empty form, and be refused for a missing answer that it holds.
    if request.headers.get("content-type", "").startswith(JSON):
        return await run_in_threadpool(_not_a_form, request)
    limit = dashboard(request).config.max_body_bytes
    form = form_values(list((await submitted_form(request, limit)).multi_items()))
    return await run_in_threadpool(decide, request, form)


def _not_a_form(request: Request) -> Response:
    message = ("send the fields form-encoded (application/x-www-form-urlencoded), as the "
               "run page's forms do; with Accept: application/json the reply is JSON. "
               "Nothing was decided.")
    if wants_json(request):
        return JSONResponse({"error": message}, status_code=415)
    return dashboard(request).render(request, "error.html", {
        "error": message, "status_code": 415}, 415)


def _refused(request: Request, message: str, status_code: int = 400,
             typed: dict[str, str] | None = None) -> Response:
    if wants_json(request):
        return JSONResponse({"error": message}, status_code=status_code)
    if status_code == 404:
        raise HTTPException(404, message)
    return run_page(request, {"error": message}, status_code, typed)


def _done(request: Request, done: waits.Decided) -> Response:
    if wants_json(request):
        return JSONResponse(asdict(done))
    return RedirectResponse(f"/runs/{request.path_params['run_id']}#wait-{done.wait_id}",
                            status_code=303)


def _which(form: dict[str, str]) -> str | None:
    return form.get("wait", "").strip() or None


def _answer(request: Request, form: dict[str, str]) -> Response:
    dash = dashboard(request)
    text, choice = form.get("text", ""), form.get("choice", "").strip()
    try:
        if choice and text.strip():
            raise WaitError("give the answer as text or as a choice, not both")
        if choice and not choice.isdigit():
            raise WaitError(f"choice '{choice}' is no number: give the choice's number, "
                            "from 1")
        done = waits.answer(dash.conn, request.path_params["run_id"], _which(form),
                            text=None if choice else text, choice=int(choice) if choice
                            else None, by=decided_by(dash))
    except RunNotFound as exc:
        return _refused(request, str(exc), 404)
    except SkillqError as exc:
        return _refused(request, str(exc))
    return _done(request, done)


def approval_inputs(dash: Dashboard, run_id: str, which: str | None,
                    form: dict[str, str]) -> tuple[str, dict[str, Any]]:
    """The wait to approve (``#id``) and the approver's inputs typed by its form, as
    `skillq approve --input NAME=VALUE` types them, except that a path is no file of
    this machine's to read: the form is served to others."""
    pairs = [f"{k.removeprefix(INPUT_PREFIX)}={v}" for k, v in form.items()
             if k.startswith(INPUT_PREFIX) and v.strip() != ""]
    with dash.db() as session:
        if session.get(PipelineRun, run_id) is None:
            raise RunNotFound(run_id)
        wait = find_open(session, run_id, APPROVAL, which)
        try:
            given = parse_cli_inputs(form_manifest(wait), pairs, local_files=False,
                                     max_bytes=dash.config.input_max_bytes)
        except InputError as exc:
            raise WaitError(f"approval #{wait.id} at step {wait.step_id}: {exc}") from None
        return f"#{wait.id}", given


def _approve(request: Request, form: dict[str, str]) -> Response:
    dash = dashboard(request)
    run_id = request.path_params["run_id"]
    try:
        which, given = approval_inputs(dash, run_id, _which(form), form)
        done = waits.approve(dash.conn, run_id, which, given=given, by=decided_by(dash))
    except RunNotFound as exc:
        return _refused(request, str(exc), 404)
    except SkillqError as exc:
        return _refused(request, str(exc), typed=form)
    return _done(request, done)


def _reject(request: Request, form: dict[str, str]) -> Response:
    dash = dashboard(request)
    try:
        done = waits.reject(dash.conn, request.path_params["run_id"], _which(form),
                            reason=form.get("reason", ""), by=decided_by(dash))
    except RunNotFound as exc:
        return _refused(request, str(exc), 404)
    except SkillqError as exc:
        return _refused(request, str(exc))
    return _done(request, done)


async def answer_submit(request: Request) -> Response:
    return await _submitted(request, _answer)


async def approve_submit(request: Request) -> Response:
    return await _submitted(request, _approve)


async def reject_submit(request: Request) -> Response:
    return await _submitted(request, _reject)


routes = [
    Route("/inbox", inbox_page, methods=["GET"], name="inbox"),
    Route("/runs/{run_id}/answer", answer_submit, methods=["POST"]),
    Route("/runs/{run_id}/approve", approve_submit, methods=["POST"]),
    Route("/runs/{run_id}/reject", reject_submit, methods=["POST"]),
]
