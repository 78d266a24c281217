"""`skillq build "TASK"`, `skillq plans` and `skillq plan show|revise|drafts`: the skill
builder from a terminal (orchestrator/build.py; docs/skill-builder.md).

`skillq build` starts the build and follows it: the plan as soon as it is proposed, with
how to approve, revise or reject it; then, when the build ends, its drafts written into
the vault and what each skill's test cases did, its cost, and the commands to run next.
Ctrl-C stops following; the build goes on."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from orchestrator.cli import common
from orchestrator.cli.common import VaultOption, announce
from shared.errors import SkillqError

if TYPE_CHECKING:
    from orchestrator.build import BuildView
    from orchestrator.connect import Connection

POLL_S = 0.5
BuildIdArg = Annotated[str, typer.Argument(help="The build's id (its run id: `skillq plans`).")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print it as JSON.")]

plan_app = typer.Typer(help="A build's plan: show it, send it back with feedback, write its "
                       "drafts into the vault.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.command("build")(build)
    app.command("plans")(plans)
    app.add_typer(plan_app, name="plan")


def build(
    task: Annotated[str, typer.Argument(
        help="What the pipeline is to do, in your words (with --from-note: optional).")] = "",
    vault_opt: VaultOption = None,
    from_note: Annotated[int | None, typer.Option(
        "--from-note", help="Start from improvement note N (`skillq notes`): plan a new "
        "version of its skill.", show_default=False)] = None,
    budget_usd: Annotated[float | None, typer.Option(
        "--budget-usd", help="What the whole build may spend (its agents' model turns, "
        "USD); none by default.", show_default=False)] = None,
    daemon: Annotated[str | None, typer.Option(
        "--daemon", help="Run every stage on this daemon (its tools and software); the "
        "drafts still land in this vault.", show_default=False)] = None,
    model: Annotated[str | None, typer.Option(
        "--model", help="provider:model the planner and builders run on (default: each "
        "daemon's SKILLQ_AGENT_MODEL).")] = None,
    detach: Annotated[bool, typer.Option(
        "--detach", help="Start it and return; follow with `skillq plan show ID`.")] = False,
) -> None:
    """Plan, approve, build in parallel and test a pipeline of skills from a task in your
    words; its drafts land in the vault, for you to try and publish."""
    from orchestrator.build import start_build
    from orchestrator.connect import connect

    loaded = common.vault(vault_opt)
    conn = connect()
    run_id = start_build(conn, loaded, task, note_id=from_note, model=model, daemon=daemon,
                         budget_usd=budget_usd,
                         workdir=str(Path.cwd()))
    announce(run_id)
    if detach:
        print(run_id)
        return
    try:
        _follow(conn, run_id, loaded.root)
    except KeyboardInterrupt:
        common.err.print(f"stopped following build {run_id}; it goes on (`skillq plan show "
                         f"{run_id}`, `skillq cancel {run_id}`)", markup=False)
        raise typer.Exit(130) from None


def _follow(conn: Connection, run_id: str, vault_root: Path) -> None:
    from orchestrator.build import build_view, ensure_build_workers, planned_queues, write_drafts

    shown_round, started = 0, False
    while True:
        view = build_view(conn, run_id)
        if view.stage == "building" and not started and view.daemon is None:
            # a browser or desktop skill's cases need that worker class on a local stack
            ensure_build_workers(conn, planned_queues(view))
            started = True
        if view.stage == "proposed" and view.round != shown_round and view.plan:
            shown_round = view.round
            _print_plan(view)
            if sys.stdin.isatty():
                _decide_here(conn, run_id)
        if view.run_state in ("succeeded", "failed", "cancelled", "rejected"):
            break
        time.sleep(POLL_S)
    for landed in write_drafts(conn, run_id, vault_root):
        where = landed.folder or landed.why
        common.err.print(f"draft {landed.skill}: {where}", markup=False)
    _print_report(conn, build_view(conn, run_id), vault_root)


def _print_plan(view: BuildView) -> None:
    from shared.build_compile import plan_md

    assert view.plan is not None
    print(plan_md(view.plan))
    common.err.print(
        f"approve: skillq approve {view.run_id}\n"
        f"revise:  skillq plan revise {view.run_id} \"what to change\"\n"
        f"reject:  skillq reject {view.run_id} --reason \"why\"", markup=False)


PROMPT = "approve (a), revise (r WHAT TO CHANGE), reject (x WHY), or Enter to wait: "


def _decide_here(conn: Connection, run_id: str) -> None:
    """A person at the terminal decides the proposed plan here (or elsewhere: Enter
    looks again); a refusal (decided meanwhile, feedback left out) is shown and asked
    again."""
    from orchestrator.build import revise
    from orchestrator.publish import who
    from orchestrator.waits import approve, reject

    by = f"terminal:{who()}"
    while True:
        common.err.print(PROMPT, end="", markup=False)
        word, _, rest = sys.stdin.readline().strip().partition(" ")
        try:
            if word in ("a", "approve"):
                approve(conn, run_id, None, by=by)
            elif word in ("r", "revise"):
                revise(conn, run_id, feedback=rest, by=by)
            elif word in ("x", "reject"):
                reject(conn, run_id, None, reason=rest, by=by)
            elif word:
                common.err.print(f"'{word}' is none of a, r, x", markup=False)
                continue
            return
        except SkillqError as exc:
            common.err.print(str(exc), markup=False)
            if "decided meanwhile" in str(exc) or "no open approval" in str(exc):
                return


def _print_report(conn: Connection, view: BuildView, vault_root: Path) -> None:
    from orchestrator.build import costs

    _print_graph(view, vault_root)
    spent = costs(conn, view)
    print(f"planned  ${spent.planning.cost_usd:.4f} (round {view.round})")
    for name, entry in sorted(view.skills.items()):
        tested = entry.get("tested") or {}
        cases = tested.get("cases") or []
        passed = sum(1 for c in cases if c.get("passed"))
        tests = f"{passed}/{len(cases)} test cases passed" if cases else "no test run"
        if name in spent.builders:
            tests += f", ${spent.builders[name].cost_usd:.4f}"
        why = f": {entry.get('why')}" if entry.get("why") else ""
        print(f"{entry.get('state', '?'):8} {name} ({tests}){why}")
    total = spent.total
    print(f"cost ${total.cost_usd:.4f} ({total.tokens_in} tokens in, {total.tokens_out} out)")
    if view.plan is not None and (view.skills.get(view.plan.name) or {}).get("state") == \
            "built":
        print(f"next: skillq try {view.plan.name} \"...\", then skillq publish "
              f"{view.plan.name}")
    if view.run_state != "succeeded":
        common.err.print(f"build {view.run_id} {view.run_state}: {view.error or ''}",
                         markup=False)
        raise typer.Exit(1)


def _print_graph(view: BuildView, vault_root: Path) -> None:
    """What the build made, as `skillq graph` draws it: the pipeline and its sub-skills."""
    from orchestrator import drawing
    from shared.vault import open_vault

    name = view.plan.name if view.plan is not None else None
    if name is None or (view.skills.get(name) or {}).get("state") != "built":
        return
    landed = open_vault(vault_root, ttl_s=0)
    if name in landed.skills:
        common.out.print(drawing.tree(landed, name))


def plans(as_json: JsonOption = False) -> None:
    """Builds, newest first: their stage, round of revision and task."""
    from orchestrator.build import listed
    from orchestrator.connect import connect

    rows = [{"id": v.run_id, "stage": v.stage, "run": v.run_state, "round": v.round,
             "task": v.task} for v in listed(connect(workers=False))]
    if as_json:
        print(json.dumps(rows, ensure_ascii=False))
        return
    if not rows:
        common.err.print("no builds yet: skillq build \"TASK\"", markup=False)
    for r in rows:
        print(f"{r['id']}  {r['stage']:9} round {r['round']}  {common.one_line(str(r['task']))}")


@plan_app.command("show")
def show(run_id: BuildIdArg, as_json: JsonOption = False) -> None:
    """The build's plan (plan.md), what its checks found, the revisions asked for, and
    each sub-skill's build so far."""
    from orchestrator.build import build_view, costs
    from orchestrator.connect import connect
    from shared.build_compile import plan_md

    conn = connect(workers=False)
    view = build_view(conn, run_id)
    spent = costs(conn, view)
    if as_json:
        print(json.dumps({**view.as_json(), "cost_usd": {
            "total": spent.total.cost_usd, "planning": spent.planning.cost_usd,
            "builders": {n: u.cost_usd for n, u in spent.builders.items()}}},
            ensure_ascii=False))
        return
    print(f"build {view.run_id}: {view.stage} (round {view.round}; run {view.run_state})")
    if view.note_id is not None:
        print(f"from improvement note #{view.note_id}: a new version of {view.improves}")
    print(plan_md(view.plan) if view.plan else "no plan yet")
    for problem in view.problems:
        print(f"problem: {problem}")
    for text in view.revisions:
        print(f"revision asked: {text}")
    for name, entry in sorted(view.skills.items()):
        cost = f" (${spent.builders[name].cost_usd:.4f})" if name in spent.builders else ""
        print(f"{name}: {entry.get('state', 'building')}{cost} {entry.get('why') or ''}"
              .rstrip())
    print(f"cost so far ${spent.total.cost_usd:.4f}, planning ${spent.planning.cost_usd:.4f}")


@plan_app.command("revise")
def revise_plan(run_id: BuildIdArg, feedback: Annotated[str, typer.Argument(
        help="What to change, in your words.")]) -> None:
    """Send the proposed plan back to its planner with your feedback; it plans again."""
    from orchestrator.build import revise
    from orchestrator.connect import connect
    from orchestrator.publish import who

    revise(connect(workers=False), run_id, feedback=feedback, by=who())
    common.err.print(f"build {run_id}: sent back to its planner", markup=False)


@plan_app.command("drafts")
def drafts(run_id: BuildIdArg, vault_opt: VaultOption = None, replace: Annotated[
        bool, typer.Option("--replace", help="Write over a folder of the same name.")] = False
           ) -> None:
    """Write the build's drafts into the vault (as `skillq build` does when it ends)."""
    from orchestrator.build import write_drafts
    from orchestrator.connect import connect

    root = common.vault_path(vault_opt)
    missed = False
    for landed in write_drafts(connect(workers=False), run_id, root, replace=replace):
        missed |= landed.folder is None
        print(f"{landed.skill}: {landed.folder or landed.why}")
    if missed:
        raise typer.Exit(1)
