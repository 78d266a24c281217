"""The dashboard's ASGI app: routes of each page group, the guard (Host, auth, form
tokens, body limit), error pages."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response

from orchestrator.connect import Connection
from orchestrator.dashboard import (
    pages_actions,
    pages_ask,
    pages_builds,
    pages_ops,
    pages_runs,
    pages_skills,
    pages_try,
    pages_waits,
)
from orchestrator.dashboard.ask_events import PendingStreams
from orchestrator.dashboard.config import DashboardConfig
from orchestrator.dashboard.context import Dashboard, dashboard, make_templates
from orchestrator.dashboard.csrf import FormTokens, cookie_name
from orchestrator.dashboard.guard import DashboardGuard
from orchestrator.dashboard.hosts import host_policy
from orchestrator.dashboard.wait_views import nav_count
from shared.errors import SkillNotFound, SkillqError


def _error_page(request: Request, message: str, status_code: int) -> Response:
    return dashboard(request).render(request, "error.html", {
        "error": message, "status_code": status_code}, status_code)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return _error_page(request, str(exc.detail), exc.status_code)


async def _skillq_error(request: Request, exc: Exception) -> Response:
    """A refusal or a bad name is a page that says why, never a traceback."""
    return _error_page(request, str(exc), 404 if isinstance(exc, SkillNotFound) else 400)


def create_app(config: DashboardConfig, conn: Connection) -> Starlette:
    app = Starlette(
        routes=[*pages_skills.routes, *pages_actions.routes, *pages_runs.routes,
                *pages_ops.routes, *pages_ask.routes, *pages_waits.routes, *pages_try.routes,
                *pages_builds.routes],
        middleware=[Middleware(
            DashboardGuard, credentials=config.credentials,
            hosts=host_policy(config.host, config.port, config.hosts),
            tokens=FormTokens(),  # a secret of this process: forms do not outlive it
            cookie=cookie_name(config.port), max_body_bytes=config.max_body_bytes)],
        exception_handlers={HTTPException: _http_error, SkillqError: _skillq_error})
    templates = make_templates()
    templates.env.globals["open_waits"] = nav_count  # the nav's Inbox badge
    app.state.dashboard = Dashboard(config, conn, templates)
    app.state.ask_streams = PendingStreams()  # the Ask page's answers, started not yet read
    return app
