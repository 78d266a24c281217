"""A build's last stage: the orchestrator compiled from the approved plan with no model
(shared/build_compile.py), validated with skillq's own rules beside the drafts it calls
and the vault's skills it reuses, and stored as a draft like theirs."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from sqlalchemy.orm import Session

from lifecycle import builds
from shared.build_compile import orchestrator_files, write_folder
from shared.build_plan import BuildPlan
from shared.db.build_models import Build
from shared.folder_store import pack_folder, unpack_folder
from shared.states import BuildStage
from shared.vault import Vault, load_vault
from workers.build import outcomes
from workers.step_types import Result


def finish(session: Session, build: Build, plan: BuildPlan, vault: Vault) -> Result:
    unbuilt = [s.name for s in plan.to_build if outcomes.state_of(build, s.name) != outcomes.BUILT]
    if plan.steps and unbuilt:
        builds.record_skill(build, plan.name, outcomes.skipped(unbuilt))
    elif plan.steps:  # none for a new version of one skill (--from-note): nothing to compile
        _compile(session, build, vault)
    builds.move(build, BuildStage.BUILT)
    return outcomes.result(build)


def _compile(session: Session, build: Build, vault: Vault) -> None:
    plan = builds.plan_of(build)  # with the builders' deviations written back
    assert plan is not None
    with tempfile.TemporaryDirectory(prefix="skillq-build-") as tmp:
        root = Path(tmp)
        for s in plan.skills:
            draft = (build.skills.get(s.name) or {}).get("draft")
            if draft:
                unpack_folder(session, draft, root / s.name)
            elif s.reuse and s.reuse in vault.skills:
                shutil.copytree(vault.skills[s.reuse].folder, root / s.reuse)
        folder = root / plan.name
        write_folder(folder, orchestrator_files(plan))
        problems = load_vault(root).problems_in(folder)
        if problems:
            builds.record_skill(build, plan.name, {
                "state": outcomes.FAILED, "why": "the compiled orchestrator does not validate: "
                + "; ".join(f"{p.field}: {p.message}" for p in problems)})
            return
        builds.record_skill(build, plan.name, {"state": outcomes.BUILT, "orchestrator": True,
                                               "draft": pack_folder(session, folder)})
