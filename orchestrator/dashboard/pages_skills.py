"""The skills list and one skill's page (manifest, graph, versions, tests, runs, trends)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.routing import Route

from orchestrator.dashboard import charts, eval_views, graph_svg, queries
from orchestrator.dashboard.context import Dashboard, dashboard
from orchestrator.dashboard.run_form import fields
from orchestrator.drawing import edges
from orchestrator.forms import manifest_fields
from orchestrator.library import repo
from orchestrator.library.dependents import find_dependents, grouped
from orchestrator.library.display import SkillState
from orchestrator.library.reach import LibraryView
from orchestrator.testing import last_results
from orchestrator.versions import no_runs, version_stats
from shared.notes import open_counts
from shared.published import list_versions
from shared.vault import Vault


def page_number(request: Request) -> int:
    text = request.query_params.get("page", "1")
    return max(1, int(text)) if text.isdigit() else 1


def skills(request: Request) -> HTMLResponse:
    return skills_page(request)


def skills_page(request: Request, extra: Mapping[str, Any] | None = None,
                status_code: int = 200) -> HTMLResponse:
    """Pinned first, then by name; a page of the vault's skills with their totals."""
    dash = dashboard(request)
    vault = dash.vault()
    size = dash.config.page_size
    page = page_number(request)
    with dash.db() as session:
        view = LibraryView(repo.states(session, dash.vault_key))
        names = view.pinned_first(sorted(vault.skills))
        shown = names[(page - 1) * size: page * size]
        totals = queries.skill_totals(session, shown, {
            n for n in shown if vault.skills[n].manifest.is_orchestrator})
        notes = open_counts(session, shown)
        deleted = queries.deleted_skills(session, dash.vault_key,
                                         request.query_params.get("deleted_after"), size)
        rows = [{"name": n, "skill": vault.skills[n], "label": view.label(
                     n, vault.skills[n].manifest.label), "state": view.state(n),
                 "totals": totals.get(n, queries.SkillTotals()), "open_notes": notes.get(n, 0)}
                for n in shown]
        return dash.render(request, "skills.html", {
            "rows": rows, "page": page, "pages": max(1, -(-len(names) // size)),
            "total": len(names), "deleted": deleted, "problems": vault.problems,
            **(extra or {})}, status_code)


def skill_graph(vault: Vault, name: str) -> Any:
    found = edges(vault, name)
    keys = dict.fromkeys([name, *(k for a, _, b in found for k in (a, b))])
    nodes = []
    for key in keys:
        skill = vault.skills.get(key)
        kind = "missing" if skill is None else ("orchestrator" if skill.manifest.is_orchestrator
                                                else str(skill.manifest.effective_approach))
        nodes.append(graph_svg.Node(key, key, kind, "missing" if skill is None else
                                    ("root" if key == name else ""),
                                    href=None if skill is None else f"/skills/{key}"))
    return graph_svg.graph_svg(nodes, [graph_svg.Edge(a, b, "" if lbl == "uses" else lbl)
                                       for a, lbl, b in found], f"sub-skills of {name}")


def skill_context(dash: Dashboard, request: Request, name: str) -> dict[str, Any]:
    """Everything the skill page shows (``SkillNotFound`` for a name not in the vault)."""
    vault = dash.vault()
    skill = vault.get(name)
    m = skill.manifest
    size = dash.config.page_size
    with dash.db() as session:
        state = repo.states(session, dash.vault_key).get(name, SkillState())
        where = queries.skill_runs_filter(session, dash.vault_key, name)
        runs = queries.runs_page(session, where=where, after=request.query_params.get("after"),
                                 limit=size, top_level=False)
        costs = queries.run_costs(session, [r.id for r in runs.items])
        points = queries.trend_points(session, where)
        stats = version_stats(session, name, orchestrator=m.is_orchestrator)
        versions = [{"row": v, "stats": stats.get(v.version, no_runs(v.version))}
                    for v in reversed(list_versions(session, name))]
        results = last_results(session, name)
        evals = eval_views.eval_section(session, name)
        notes = queries.notes_page(session, status="open", skill=name, after=None, limit=size)
        totals = queries.skill_totals(session, [name], {name} if m.is_orchestrator
                                      else set()).get(name, queries.SkillTotals())
    tests = skill.benchmarks.tests if skill.benchmarks is not None else ()
    return {
        "skill": skill, "m": m, "state": state,
        "label": LibraryView({name: state}).label(name, m.label),
        "manifest_json": queries.as_json_text(manifest_fields(m)),
        "graph": skill_graph(vault, name),
        "dependents": grouped(find_dependents(vault, name)),
        "versions": versions, "tests": [(t, results.get(t.id)) for t in tests],
        "evals": evals,
        "runs": runs, "costs": costs, "totals": totals, "notes": notes.items,
        "duration_chart": charts.trend_svg(points, charts.DURATION),
        "cost_chart": charts.trend_svg(points, charts.COST),
        "tokens_chart": charts.trend_svg(points, charts.TOKENS),
        "points": len(points), "fields": fields(m),
        "problems": vault.problems_in(skill.folder),
    }


def skill_page(request: Request, extra: Mapping[str, Any] | None = None,
               status_code: int = 200) -> HTMLResponse:
    dash = dashboard(request)
    name = request.path_params["name"]
    context = skill_context(dash, request, name)
    return dash.render(request, "skill.html", {**context, **(extra or {})}, status_code)


def skill_get(request: Request) -> HTMLResponse:
    return skill_page(request)


routes = [
    Route("/", skills, name="skills"),
    Route("/skills", skills),
    Route("/skills/{name}", skill_get, name="skill"),
]
