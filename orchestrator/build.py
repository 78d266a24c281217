"""`skillq build` from the caller's side: start a build (a run of the built-in
skillq-build), read builds and their plans, send a plan back with feedback, and write a
build's drafts into the caller's vault, each checked against the hash it was stored
with (shared/folder_store.py). Nothing here writes a half-built skill: a draft lands
whole, under a temporary name renamed into place, or not at all."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from lifecycle import builds
from lifecycle.run_costs import Usage, run_usage
from orchestrator.connect import Connection
from orchestrator.launch import launch_routed
from orchestrator.waits import revise
from shared.build_plan import BuildPlan
from shared.builtin import BUILD, PLANNER, builtin_skill
from shared.db.build_models import Build
from shared.db.models import PipelineRun
from shared.db.notes_models import ImprovementNote
from shared.db.session import transaction
from shared.errors import BuildError, InputError
from shared.folder_store import FolderMismatch, unpack_folder
from shared.model_spec import resolve as resolve_model
from shared.plan import build_plan
from shared.problems import Problem
from shared.queues import QueueClass, queue_for
from shared.readonly import make_writable
from shared.skillfiles import RunSource
from shared.states import BuildStage, RunState
from shared.vault import Vault, resolved_root

__all__ = [
    "BuildView",
    "Landed",
    "build_view",
    "costs",
    "listed",
    "revise",
    "start_build",
    "write_drafts",
]


def start_build(conn: Connection, vault: Vault, task: str, *, note_id: int | None = None,
                model: str | None = None, daemon: str | None = None,
                budget_usd: float | None = None, workdir: str | None = None,
                triggered_by: str = "cli") -> str:
    """Record a build and set it moving; its run id (the build's id). ``note_id``: an
    improvement note it starts from, planning a new version of that note's skill;
    ``daemon``: the daemon every stage runs on; ``budget_usd``: what it may spend."""
    note, improves = "", None
    if note_id is not None:
        note, improves = _note(conn, vault, note_id)
        task = task.strip() or f"Improve the skill '{improves}' as improvement note " \
            f"#{note_id} says."
    if not task.strip():
        raise InputError([Problem("skillq build", "TASK", "say what the pipeline is to do, "
                                  "e.g. skillq build \"each Monday, post last week's "
                                  "commits\"")])
    skill = builtin_skill(BUILD)
    assert skill is not None  # shipped with the package
    if model:
        resolve_model(model, where="--model")  # AgentError, before anything is recorded
    if budget_usd is not None and budget_usd <= 0:
        raise InputError([Problem("skillq build", "--budget-usd", "give a budget above 0 "
                                  "USD, or none for no limit")])
    given = {"task": task, "note": note, "model": model or "", "daemon": daemon or "",
             "budget_usd": budget_usd or 0, "note_id": note_id or 0,
             "improves": improves or ""}
    plan = build_plan(skill, vault.skills, given, workdir=workdir).pinned_to(daemon)
    if daemon is None:
        ensure_build_workers(conn, (QueueClass.AGENT, QueueClass.DEFAULT))
    run_id = launch_routed(conn, vault, skill, given, plan=plan, source=RunSource.BUILD.value,
                           triggered_by=triggered_by, workdir=workdir)
    with transaction(conn.endpoints.database_url) as session:  # `plan show` has it at once
        builds.open_build(session, run_id, vault=str(resolved_root(vault.root)), task=task,
                          note_id=note_id, improves=improves, daemon=daemon)
    return run_id


def ensure_build_workers(conn: Connection, queues: Iterable[str]) -> None:
    """On a local stack, the workers a build's stages need, started if they are not: its
    planner and builders (agent), its drafts' test cases (by their approach's queue)."""
    if conn.local_workers is None:
        return
    from orchestrator.local_stack import classes_for_queues, ensure_workers

    ensure_workers(conn.local_workers, conn.endpoints, classes_for_queues(queues))


def planned_queues(view: BuildView) -> set[str]:
    """The queues the test cases of a build's planned sub-skills run on."""
    if view.plan is None:
        return set()
    return {str(queue_for(s.approach)) for s in view.plan.to_build}


def _note(conn: Connection, vault: Vault, note_id: int) -> tuple[str, str]:
    """The note as the planner reads it, and the skill it is on (in this vault)."""
    with transaction(conn.endpoints.database_url) as session:
        note = session.get(ImprovementNote, note_id)
        if note is None:
            raise BuildError(f"no improvement note #{note_id}; `skillq notes` lists them")
        text = (f"Improvement note #{note.id} on skill '{note.skill}' v{note.version} (step "
                f"'{note.step_id}' of {note.pipeline}, seen {note.count} time(s)):\n"
                f"- what happened: {note.summary}\n- error: {note.error}\n"
                f"- diagnosis: {note.diagnosis}\n- suggested fix: {note.suggested_fix}\n"
                f"- inputs (secrets hidden): {json.dumps(note.inputs, ensure_ascii=False)}")
        skill = note.skill
    vault.get(skill)  # SkillNotFound, naming the vault: a note on a skill it does not have
    return text, skill


@dataclass(frozen=True, slots=True)
class BuildView:
    """A build as `skillq plans` and `skillq plan show` show it."""

    run_id: str
    run_state: str
    stage: str
    task: str
    round: int
    plan: BuildPlan | None
    problems: tuple[str, ...]
    revisions: tuple[str, ...]
    skills: dict[str, Any]
    error: str | None
    vault: str
    note_id: int | None  # --from-note: the note it starts from
    improves: str | None  # the skill it plans a new version of
    daemon: str | None

    def as_json(self) -> dict[str, Any]:
        """As `skillq plan show --json` prints it (and the dashboard answers JSON)."""
        return {"id": self.run_id, "stage": self.stage, "run": self.run_state,
                "round": self.round, "task": self.task,
                "plan": self.plan.model_dump(mode="json", by_alias=True, exclude_unset=True)
                if self.plan else None, "problems": list(self.problems),
                "revisions": list(self.revisions), "skills": self.skills,
                "error": self.error, "note_id": self.note_id, "improves": self.improves,
                "daemon": self.daemon}


def _view(session: Session, build: Build) -> BuildView:
    run = session.get(PipelineRun, build.run_id)
    stage = build.stage
    if run is not None and RunState(run.state).terminal and not BuildStage(stage).ended:
        stage = run.state  # cancelled (or lost) mid-way: it goes no further
    return BuildView(build.run_id, run.state if run else "?", stage, build.task,
                     build.round, builds.plan_of(build), tuple(build.problems),
                     tuple(build.revisions), dict(build.skills),
                     build.error or (run.error if run else None), build.vault,
                     build.note_id, build.improves, build.daemon)


def listed(conn: Connection, limit: int = 50) -> list[BuildView]:
    with transaction(conn.endpoints.database_url) as session:
        return [_view(session, b) for b in builds.listed(session, limit)]


def build_view(conn: Connection, run_id: str) -> BuildView:
    with transaction(conn.endpoints.database_url) as session:
        build = builds.get(session, run_id)
        if build is None:
            raise BuildError(f"no build {run_id}; `skillq plans` lists them")
        return _view(session, build)


@dataclass(frozen=True, slots=True)
class Costs:
    """What a build cost: in all, its planning (every round), and each builder (its
    test cases' runs included), by sub-skill."""

    total: Usage
    planning: Usage
    builders: dict[str, Usage]


def costs(conn: Connection, view: BuildView) -> Costs:
    with transaction(conn.endpoints.database_url) as session:
        planners = session.scalars(select(PipelineRun.id).where(
            PipelineRun.agent_call.startswith(f"{view.run_id}/", autoescape=True),
            PipelineRun.skill == PLANNER)).all()
        builders = {n: str(e["run_id"]) for n, e in view.skills.items() if e.get("run_id")}
        # one read each: asked together, a run's tree would leave out the others'
        total = run_usage(session, [view.run_id]).get(view.run_id, Usage())
        found = run_usage(session, [*planners, *builders.values()])
    spent = [found.get(r, Usage()) for r in planners]
    return Costs(total,
                 Usage(sum(u.cost_usd for u in spent), sum(u.tokens_in for u in spent),
                       sum(u.tokens_out for u in spent)),
                 {n: found.get(r, Usage()) for n, r in builders.items()})


@dataclass(frozen=True, slots=True)
class Landed:
    skill: str
    folder: Path | None  # where it was written; None when it was not
    why: str | None = None  # why not


def write_drafts(conn: Connection, run_id: str, vault_root: Path, *,
                 replace: bool = False) -> list[Landed]:
    """Every built draft of the build, written into ``vault_root`` as a skill folder.
    A folder already there is left as it is unless ``replace``."""
    landed = []
    with transaction(conn.endpoints.database_url) as session:
        build = builds.get(session, run_id)
        if build is None:
            raise BuildError(f"no build {run_id}; `skillq plans` lists them")
        for name, entry in sorted(build.skills.items()):
            draft = entry.get("draft") if entry.get("state") == "built" else None
            if draft:  # a new version of a skill (--from-note) takes its folder's place
                landed.append(_land(session, name, draft, vault_root,
                                    replace or name == build.improves))
    return landed


def _land(session: Session, name: str, draft: dict[str, Any], vault_root: Path,
          replace: bool) -> Landed:
    dest = vault_root / name
    if dest.exists() and not replace:
        return Landed(name, None, f"{dest} exists; left as it is (--replace writes over it)")
    vault_root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{name}.", dir=vault_root) as tmp:
        staged = Path(tmp) / name
        try:
            unpack_folder(session, draft, staged)
        except (FolderMismatch, KeyError) as exc:
            return Landed(name, None, f"not written: {exc}")
        if dest.exists():  # its published version stays in the store (`skillq rollback`)
            make_writable(dest)
            shutil.rmtree(dest)
        staged.rename(dest)
    return Landed(name, dest)
