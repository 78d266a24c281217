"""Pipeline runs: the list, and one run's steps as a graph and a tree of attempts, each
step item's questions and approvals after its newest attempt (wait_views.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from lifecycle.run_costs import Usage, run_usage
from orchestrator.dashboard import graph_svg, queries, step_states, wait_views
from orchestrator.dashboard.context import dashboard
from orchestrator.dashboard.wait_views import WaitView
from orchestrator.history import RunTree, run_tree
from shared.attempt_id import AttemptId
from shared.db.models import Artifact, PipelineRun, StepRun
from shared.plan import Plan
from shared.states import RunState
from shared.store import REF_KEY, is_ref

REFRESH_S = 2  # a live run's page reloads itself this often


def runs(request: Request) -> HTMLResponse:
    dash = dashboard(request)
    skill = request.query_params.get("skill") or None
    with dash.db() as session:
        where = PipelineRun.skill == skill if skill else None
        page = queries.runs_page(session, where=where, after=request.query_params.get("after"),
                                 limit=dash.config.page_size, top_level=skill is None)
        costs = queries.run_costs(session, [r.id for r in page.items])
        return dash.render(request, "runs.html", {"runs": page, "costs": costs,
                                                  "skill": skill})


def artifact_keys(value: Any) -> list[str]:
    """The store keys of every reference inside an output value (downloadable)."""
    if is_ref(value):
        return [value[REF_KEY]]
    if isinstance(value, dict):
        return [k for v in value.values() for k in artifact_keys(v)]
    if isinstance(value, list):
        return [k for v in value for k in artifact_keys(v)]
    return []


@dataclass(frozen=True)
class Attempt:
    row: StepRun
    path: str  # "child/shout" for a nested run's step
    depth: int
    outputs: str
    artifacts: list[str]
    notes: list[Any]
    waits: list[WaitView] = field(default_factory=list)  # its item's, on its newest attempt


def attempts(tree: RunTree, notes: dict[str, list[Any]], waits: Mapping[int, WaitView],
             prefix: str = "", depth: int = 0) -> list[Attempt]:
    """Every attempt of the run, a nested run's right after the step that started it."""
    newest = {r.id for rows in step_states.newest_attempts(tree.steps).values() for r in rows}
    found = []
    for row in tree.steps:
        found.append(Attempt(row, prefix + row.step_id, depth,
                             "" if row.outputs is None else queries.as_json_text(row.outputs),
                             artifact_keys(row.outputs), notes.get(row.id, []),
                             [waits[w.id] for w in tree.waits_of(row.step_id, row.item_index)]
                             if row.id in newest else []))
        child = tree.children.get(row.id)
        if child is not None:
            found += attempts(child, notes, waits, f"{prefix}{row.step_id}/", depth + 1)
    return found


def all_rows(tree: RunTree) -> list[StepRun]:
    return [*tree.steps, *(r for c in tree.children.values() for r in all_rows(c))]


def step_graph(tree: RunTree) -> Any:
    """The run's own steps (from its frozen plan), each coloured by what its items did
    (orchestrator/dashboard/step_states.py)."""
    run = tree.run
    try:
        plan = Plan.model_validate(run.plan)
    except ValidationError:
        return None
    by_step = step_states.newest_attempts(tree.steps)
    asks = wait_views.open_kinds(tree.waits)
    nodes = []
    for step in plan.steps:
        view = step_states.step_view(run, step.id, by_step.get(step.id, []),
                                     run.progress.get(step.id), asks.get(step.id, ()))
        nodes.append(graph_svg.Node(step.id, f"{step.id}: {step.skill}", view.detail,
                                    view.css))
    links = [graph_svg.Edge(dep, s.id) for s in plan.steps for dep in s.after]
    return graph_svg.graph_svg(nodes, links, f"steps of {run.id}")


def run_page(request: Request, extra: Mapping[str, Any] | None = None,
             status_code: int = 200, typed: Mapping[str, str] | None = None) -> HTMLResponse:
    """``typed``: a refused approval form's fields, shown again in its form."""
    dash = dashboard(request)
    run_id = request.path_params["run_id"]
    with dash.db() as session:
        tree = run_tree(session, run_id)
        if tree is None:
            raise HTTPException(404, f"no run {run_id}; the Runs page lists them")
        rows = all_rows(tree)
        failed = queries.failed_attempts(rows)
        notes = queries.notes_for_attempts(session, failed)
        waits = wait_views.views(session, tree, typed)
        asking = [v for v in waits.values() if v.open]
        # A page that reloads itself would wipe an answer being typed: while a person is
        # asked, it waits for them (their decision's redirect brings it back live).
        live = not RunState(tree.run.state).terminal and not asking
        usage = run_usage(session, [run_id]).get(run_id, Usage())
        return dash.render(request, "run.html", {
            **(extra or {}),
            "run": tree.run, "attempts": attempts(tree, notes, waits), "failed": failed,
            "asking": asking,
            "parent_run": AttemptId.parse(tree.run.parent_step_run_id).run_id
            if tree.run.parent_step_run_id else None,
            "notes": notes, "live": live, "refresh_s": REFRESH_S,
            "graph": step_graph(tree),
            "duration_ms": queries.duration_ms(tree.run),
            "cost": usage.cost_usd, "usage": usage,
            "inputs": queries.as_json_text(tree.run.inputs),
            "outputs": None if tree.run.outputs is None
            else queries.as_json_text(tree.run.outputs),
            "output_artifacts": artifact_keys(tree.run.outputs)}, status_code)


def run_get(request: Request) -> HTMLResponse:
    return run_page(request)


def artifact(request: Request) -> Response:
    """A stored output's bytes, as a download."""
    dash = dashboard(request)
    key = request.path_params["key"]
    with dash.db() as session:
        row = session.get(Artifact, key)
        if row is None:
            raise HTTPException(404, f"no artifact {key}")
        name = key.replace(":", "-") + (".json" if row.media_type.endswith("json") else "")
        return Response(bytes(row.content), media_type=row.media_type, headers={
            "Content-Disposition": f'attachment; filename="{name}"'})


routes = [
    Route("/runs", runs, name="runs"),
    Route("/runs/{run_id}", run_get, name="run"),
    Route("/artifacts/{key}", artifact, name="artifact"),
]
