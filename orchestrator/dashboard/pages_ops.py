"""Daemons (capabilities, queues, online state, heartbeat), schedules (next run, pause,
resume) and improvement notes (open, dismissed, resolved, won't fix, and those actions)."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from lifecycle import builds
from orchestrator.build import start_build
from orchestrator.dashboard import queries
from orchestrator.dashboard.context import dashboard
from orchestrator.dashboard.csrf import submitted_form
from orchestrator.schedules.records import set_paused
from shared.errors import SkillqError
from shared.notes import Status, set_status

NOTE_ACTIONS = {"dismiss": Status.DISMISSED, "resolve": Status.RESOLVED,
                "wontfix": Status.WONTFIX}


def daemons(request: Request) -> HTMLResponse:
    dash = dashboard(request)
    with dash.db() as session:
        page = queries.daemons_page(session, offline_after_s=dash.config.daemon_offline_after_s,
                                    after=request.query_params.get("after"),
                                    limit=dash.config.page_size)
        return dash.render(request, "daemons.html", {"daemons": page})


def schedules(request: Request, message: str | None = None, error: str | None = None,
              status_code: int = 200) -> HTMLResponse:
    dash = dashboard(request)
    with dash.db() as session:
        page = queries.schedules_page(session, after=request.query_params.get("after"),
                                      limit=dash.config.page_size)
        return dash.render(request, "schedules.html", {"schedules": page, "message": message,
                                                       "error": error}, status_code)


async def schedule_action(request: Request) -> Response:
    form = await submitted_form(request, dashboard(request).config.max_body_bytes)
    action = str(form.get("action", ""))
    return await run_in_threadpool(_pause, request, action)


def _pause(request: Request, action: str) -> HTMLResponse:
    """`skillq schedule pause|resume ID`."""
    dash = dashboard(request)
    schedule_id = request.path_params["schedule_id"]
    if action not in ("pause", "resume"):
        return schedules(request, error="choose pause or resume", status_code=400)
    try:
        with dash.db() as session:
            row = set_paused(session, schedule_id, action == "pause")
            text = f"schedule {row.id} ({row.skill}) " + (
                "paused" if row.paused else
                f"resumed; next run {row.next_due_at:%Y-%m-%d %H:%M %Z}")
    except SkillqError as exc:
        return schedules(request, error=str(exc), status_code=400)
    return schedules(request, message=text)


def notes(request: Request, message: str | None = None, error: str | None = None,
          status_code: int = 200) -> HTMLResponse:
    dash = dashboard(request)
    status = request.query_params.get("status", "open")
    chosen = status if status in queries.NOTE_STATUSES else None  # "all"
    with dash.db() as session:
        page = queries.notes_page(session, status=chosen,
                                  skill=request.query_params.get("skill") or None,
                                  after=request.query_params.get("after"),
                                  limit=dash.config.page_size)
        return dash.render(request, "notes.html", {
            "notes": page, "status": chosen or "all", "statuses": queries.NOTE_STATUSES,
            "builds": builds.of_notes(session, [n.id for n in page.items]),
            "skill": request.query_params.get("skill", ""), "message": message,
            "error": error}, status_code)


async def note_action(request: Request) -> Response:
    form = await submitted_form(request, dashboard(request).config.max_body_bytes)
    action = str(form.get("action", ""))
    if action == "build":
        return await run_in_threadpool(_build_from_note, request)
    return await run_in_threadpool(_close_note, request, action)


def _build_from_note(request: Request) -> Response:
    """`skillq build --from-note ID` (seed 000's "open in skill builder"): a build that
    plans a new version of the note's skill, its page next."""
    dash = dashboard(request)
    try:
        run_id = start_build(dash.conn, dash.vault(fresh=True), "",
                             note_id=request.path_params["note_id"], triggered_by="dashboard")
    except SkillqError as exc:
        return notes(request, error=str(exc), status_code=400)
    return RedirectResponse(f"/builds/{run_id}", status_code=303)


def _close_note(request: Request, action: str) -> HTMLResponse:
    """`skillq notes dismiss|resolve|wontfix ID`."""
    dash = dashboard(request)
    note_id = request.path_params["note_id"]
    if action not in NOTE_ACTIONS:
        return notes(request, error="choose dismiss, resolve or wontfix", status_code=400)
    try:
        with dash.db() as session:
            note = set_status(session, note_id, NOTE_ACTIONS[action])
            text = f"✓ note {note_id} ({note.skill} step {note.step_id}) is now {note.status}"
    except SkillqError as exc:
        return notes(request, error=str(exc), status_code=400)
    return notes(request, message=text)


routes = [
    Route("/daemons", daemons, name="daemons"),
    Route("/schedules", schedules, name="schedules"),
    Route("/schedules/{schedule_id:int}", schedule_action, methods=["POST"]),
    Route("/notes", notes, name="notes"),
    Route("/notes/{note_id:int}", note_action, methods=["POST"]),
]
