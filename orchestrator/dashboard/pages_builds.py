"""Skill builds in the browser (the plan panel), on the CLI's code path
(orchestrator/build.py, which `skillq plans` and `skillq plan show|revise` call, and
orchestrator/waits.py, which `skillq approve` and `reject` call: a build's plan approval
is an approval wait of the build's run):

- ``GET /builds``: every build, newest first: its stage, run state, round and task.
- ``GET /builds/RUN``: one build: its plan (plan.md), what its checks found, the
  revisions asked, each sub-skill's build with its test cases; live while it goes on.
- ``POST /builds/RUN/approve``: approve the proposed plan (its builders start).
- ``POST /builds/RUN/revise``: ``feedback``: the planner plans again with it.
- ``POST /builds/RUN/reject``: ``reason``: the build ends rejected.

The forms post form-encoded with the page's token, as the run page's do
(pages_waits.py). A decision redirects (303) to the build's page; a refusal is that page
again with the message, status 400, and decides nothing. With ``Accept:
application/json`` each answers JSON instead: the list as `skillq plans --json`, a build
as `skillq plan show --json` (with its progress), a decision as `skillq approve --json`,
a refusal as ``{"error": ...}``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from orchestrator import build, waits
from orchestrator.dashboard import build_views
from orchestrator.dashboard.context import dashboard
from orchestrator.dashboard.csrf import submitted_form
from orchestrator.dashboard.pages_waits import JSON, wants_json
from orchestrator.dashboard.run_form import form_values
from orchestrator.dashboard.wait_views import decided_by
from shared.build_compile import plan_md
from shared.errors import BuildError, RunNotFound, SkillqError, WaitError

REFRESH_S = 2  # a live build's page reloads itself this often (as a run's page does)


def builds_page(request: Request) -> Response:
    dash = dashboard(request)
    found = build.listed(dash.conn, limit=dash.config.page_size)
    if wants_json(request):
        return JSONResponse([build_views.row_json(v) for v in found])
    return dash.render(request, "builds.html", {"builds": found})


def build_page(request: Request, extra: Mapping[str, Any] | None = None,
               status_code: int = 200, typed: Mapping[str, str] | None = None) -> Response:
    """``typed``: a refused form's fields, shown again in it."""
    dash = dashboard(request)
    run_id = request.path_params["run_id"]
    try:
        view = build.build_view(dash.conn, run_id)
    except BuildError as exc:
        raise HTTPException(404, str(exc)) from None
    if wants_json(request):
        return JSONResponse(build_views.as_json(view), status_code=status_code)
    found = build_views.skill_builds(view)
    proposed = build_views.proposed(view)
    return dash.render(request, "build.html", {
        **(extra or {}),
        "build": view, "plan_md": plan_md(view.plan) if view.plan else None,
        "skills": found, "progress": build_views.progress(view, found),
        "costs": build.costs(dash.conn, view),
        "proposed": proposed, "ended": build_views.ended(view),
        # A page that reloads itself would wipe feedback being typed: while the plan
        # waits for a person, it waits for them (their decision's redirect brings it
        # back live), as a run's page does.
        "live": not build_views.ended(view) and not proposed, "refresh_s": REFRESH_S,
        "typed": typed or {}}, status_code)


def build_get(request: Request) -> Response:
    return build_page(request)


Decide = Callable[[Request, dict[str, str]], Response]


async def _submitted(request: Request, decide: Decide) -> Response:
    # The guard reads the form token from a form body or the header; a JSON body would
    # arrive as an empty form, and be refused for a missing field that it holds.
    if request.headers.get("content-type", "").startswith(JSON):
        return _refused(request, "send the fields form-encoded (application/x-www-form-"
                        "urlencoded), as the build page's forms do; with Accept: "
                        "application/json the reply is JSON. Nothing was decided.", 415)
    limit = dashboard(request).config.max_body_bytes
    form = form_values(list((await submitted_form(request, limit)).multi_items()))
    return await run_in_threadpool(decide, request, form)


def _refused(request: Request, message: str, status_code: int = 400,
             typed: Mapping[str, str] | None = None) -> Response:
    if wants_json(request):
        return JSONResponse({"error": message}, status_code=status_code)
    if status_code != 400:
        raise HTTPException(status_code, message)
    return build_page(request, {"error": message}, status_code, typed)


def _decided(request: Request, form: dict[str, str],
             decide: Callable[[str, str], waits.Decided]) -> Response:
    """``decide(run_id, by)``, then the build's page (or the decision as JSON)."""
    dash = dashboard(request)
    run_id = request.path_params["run_id"]
    try:
        view = build.build_view(dash.conn, run_id)
        if not build_views.proposed(view):  # a build's plan, not another approval of it
            raise WaitError(f"build {run_id} is {view.stage}, not proposed: there is no "
                            "plan waiting for a decision")
        done = decide(run_id, decided_by(dash))
    except (BuildError, RunNotFound) as exc:
        return _refused(request, str(exc), 404)
    except SkillqError as exc:
        return _refused(request, str(exc), typed=form)
    if wants_json(request):
        return JSONResponse(asdict(done))
    return RedirectResponse(f"/builds/{run_id}", status_code=303)


def _approve(request: Request, form: dict[str, str]) -> Response:
    conn = dashboard(request).conn
    return _decided(request, form, lambda run_id, by: waits.approve(
        conn, run_id, None, given={}, by=by))


def _revise(request: Request, form: dict[str, str]) -> Response:
    conn = dashboard(request).conn
    return _decided(request, form, lambda run_id, by: build.revise(
        conn, run_id, feedback=form.get("feedback", ""), by=by))


def _reject(request: Request, form: dict[str, str]) -> Response:
    conn = dashboard(request).conn
    return _decided(request, form, lambda run_id, by: waits.reject(
        conn, run_id, None, reason=form.get("reason", ""), by=by))


async def approve_submit(request: Request) -> Response:
    return await _submitted(request, _approve)


async def revise_submit(request: Request) -> Response:
    return await _submitted(request, _revise)


async def reject_submit(request: Request) -> Response:
    return await _submitted(request, _reject)


routes = [
    Route("/builds", builds_page, methods=["GET"], name="builds"),
    Route("/builds/{run_id}", build_get, methods=["GET"], name="build"),
    Route("/builds/{run_id}/approve", approve_submit, methods=["POST"]),
    Route("/builds/{run_id}/revise", revise_submit, methods=["POST"]),
    Route("/builds/{run_id}/reject", reject_submit, methods=["POST"]),
]
