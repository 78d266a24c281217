"""Quick actions: run a skill from its form, run its tests, enable or disable, delete,
roll back. Each calls what the CLI command calls and says what the CLI says; a refusal
(bad input, dependents, nothing to roll back to) is shown on the page and changes nothing.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from orchestrator.dashboard.context import Dashboard, dashboard
from orchestrator.dashboard.csrf import submitted_form
from orchestrator.dashboard.pages_skills import skill_page, skills_page
from orchestrator.dashboard.run_form import fields, form_values, parse_form
from orchestrator.launch import start_run
from orchestrator.library import repo
from orchestrator.library.delete import check_dependents, delete_skill
from orchestrator.library.dependents import grouped
from orchestrator.rollback import rollback
from orchestrator.submit import checked
from orchestrator.testing import cases_of, run_tests
from shared.errors import HasDependents, SkillqError
from shared.problems import display_path
from shared.skillfiles import RunSource

log = logging.getLogger(__name__)


async def _form(request: Request) -> dict[str, str]:
    limit = dashboard(request).config.max_body_bytes
    return form_values(list((await submitted_form(request, limit)).multi_items()))


def _flag(form: dict[str, str], key: str) -> bool:
    return form.get(key, "") in ("1", "true", "on", "yes")


def run_form(request: Request) -> HTMLResponse:
    dash = dashboard(request)
    skill = dash.vault().get(request.path_params["name"])
    return dash.render(request, "run_form.html", {"skill": skill, "fields": fields(
        skill.manifest)})


async def run_submit(request: Request) -> Response:
    form = await _form(request)
    return await run_in_threadpool(_start, request, form)


def _start(request: Request, form: dict[str, str]) -> Response:
    """As `skillq run NAME --input ...` does: validate the skill, parse the inputs, start
    the run. A refusal re-shows the form with the CLI's message; no run is recorded."""
    dash = dashboard(request)
    vault = dash.vault(fresh=True)
    skill = vault.get(request.path_params["name"])
    try:
        checked(vault, skill)
        given = parse_form(skill.manifest, form, max_bytes=dash.config.input_max_bytes)
        run_id = start_run(dash.conn, vault, skill, given, source=RunSource.PRODUCTION.value,
                           triggered_by="dashboard")
    except SkillqError as exc:
        return dash.render(request, "run_form.html", {
            "skill": skill, "fields": fields(skill.manifest, form), "error": str(exc)},
            status_code=400)
    return RedirectResponse(f"/runs/{run_id}", status_code=303)


def _run_tests_in_background(dash: Dashboard, name: str) -> None:
    try:
        vault = dash.vault(fresh=True)
        run_tests(dash.conn, vault, vault.get(name))
    except Exception:  # nobody waits for this thread: the log is where its failure goes
        log.exception("test cases of %s did not run", name)


def test_submit(request: Request) -> HTMLResponse:
    """Start the skill's test cases (as `skillq test NAME`); their results land in the
    Test cases table as the runs end."""
    dash = dashboard(request)
    name = request.path_params["name"]
    try:
        cases = cases_of(dash.vault(fresh=True).get(name))
    except SkillqError as exc:
        return skill_page(request, {"error": str(exc)}, 400)
    threading.Thread(target=_run_tests_in_background, args=(dash, name),
                     name=f"tests-{name}", daemon=True).start()
    return skill_page(request, {"message": f"running {len(cases)} test case(s) of {name}; "
                                f"each result appears under Test cases when its run ends "
                                f"(reload)"})


async def enabled_submit(request: Request) -> Response:
    form = await _form(request)
    return await run_in_threadpool(_set_enabled, request, form)


def _set_enabled(request: Request, form: dict[str, str]) -> HTMLResponse:
    """`skillq enable NAME` / `skillq disable NAME [--force]`."""
    dash = dashboard(request)
    vault = dash.vault(fresh=True)
    skill = vault.get(request.path_params["name"])
    enable = _flag(form, "enabled")
    refs: tuple[Any, ...] = ()
    try:
        if not enable:
            refs = check_dependents(vault, skill.name, "disable", force=_flag(form, "force"))
        with dash.db() as session:
            changed = repo.set_enabled(session, dash.vault_key, skill.name, enable)
    except HasDependents as exc:
        return skill_page(request, {"error": str(exc), "force_action": "disable"}, 409)
    word = "enabled" if enable else "disabled"
    message = f"{skill.name}: {word if changed else 'already ' + word}"
    if refs:
        message += ("; warning: these skills will be refused while it is disabled: "
                    + "; ".join(grouped(list(refs))))
    return skill_page(request, {"message": message})


async def delete_submit(request: Request) -> Response:
    form = await _form(request)
    return await run_in_threadpool(_delete, request, form)


def _delete(request: Request, form: dict[str, str]) -> HTMLResponse:
    """`skillq delete NAME [--force]`: refused while others refer to it, naming them."""
    dash = dashboard(request)
    vault = dash.vault(fresh=True)
    skill = vault.get(request.path_params["name"])
    force = _flag(form, "force")
    try:
        check_dependents(vault, skill.name, "delete", force=force)
        deleted = delete_skill(dash.config.database_url, vault, skill.name, force=force)
    except HasDependents as exc:
        return skill_page(request, {"error": str(exc), "force_action": "delete"}, 409)
    except SkillqError as exc:
        return skill_page(request, {"error": str(exc)}, 400)
    message = (f"deleted {deleted.name}: folder moved to {display_path(deleted.archived)}; "
               "its runs are kept")
    if deleted.referrers:
        message += ("; warning: these skills now refer to a deleted skill: "
                    + "; ".join(grouped(list(deleted.referrers))))
    return skills_page(request, {"message": message})


async def rollback_submit(request: Request) -> Response:
    form = await _form(request)
    return await run_in_threadpool(_rollback, request, form)


def _rollback(request: Request, form: dict[str, str]) -> HTMLResponse:
    """`skillq rollback NAME --to N [--force]`."""
    dash = dashboard(request)
    vault = dash.vault(fresh=True)
    name = vault.get(request.path_params["name"]).name
    to = form.get("to", "")
    if not to.isdigit() or int(to) < 1:
        return skill_page(request, {"error": "choose the published version to restore"}, 400)
    try:
        done = rollback(dash.conn, vault, name, int(to), force=_flag(form, "force"))
    except SkillqError as exc:
        return skill_page(request, {"error": str(exc), "rollback_to": to}, 400)
    origin = f" (rollback of v{done.rolled_back_from})" if done.rolled_back_from else ""
    return skill_page(request, {"message": f"✓ published {done.skill} v{done.version}{origin}: "
                                f"{done.files} file(s), folder {done.folder_hash}; "
                                f"tests: {done.tests}"})


routes = [
    Route("/skills/{name}/run", run_form, methods=["GET"], name="run_form"),
    Route("/skills/{name}/run", run_submit, methods=["POST"]),
    Route("/skills/{name}/test", test_submit, methods=["POST"]),
    Route("/skills/{name}/enabled", enabled_submit, methods=["POST"]),
    Route("/skills/{name}/delete", delete_submit, methods=["POST"]),
    Route("/skills/{name}/rollback", rollback_submit, methods=["POST"]),
]
