"""A build's agent steps as the step runner sees them (workers/agent/step.py): the tools
the planner and a builder get beyond an agent step's own, and what a builder's step
records when it ends.

A builder's draft folder is made from the approved plan on the machine that builds it
(shared/build_compile.py's starting files), the first time its step runs there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from pydantic_ai import Tool

from lifecycle import builds
from lifecycle.context import WorkerContext
from shared.build_compile import skill_files, write_folder
from shared.builtin import BUILDER, PLANNER
from shared.db.session import transaction
from shared.folder_store import pack_folder
from shared.skill import Skill
from shared.vault import Vault
from workers import sandbox as sandboxes
from workers.agent.bash_tool import BashTool
from workers.agent.build_tools import DraftTests
from workers.agent.calls import Calls
from workers.agent.draft_tools import DraftFolder
from workers.agent.plan_tool import PlanTool
from workers.build.drafts import draft_folder

MAX_DRAFT_FILE_BYTES = 1024 * 1024  # a skill's own file: generated data stays out
BASH_TIMEOUT_S = 120.0


def build_tools(ctx: WorkerContext, skill: Skill, inputs: Mapping[str, Any], row_id: str,
                vault: Vault, calls: Calls) -> list[Tool[None]]:
    """The planner's update_plan; a builder's file, bash and test tools; else none."""
    build_id = str(inputs.get("build") or "")
    if skill.name == PLANNER:
        return [PlanTool(ctx.database_url, build_id, dict(vault.skills)).tool()]
    if skill.name != BUILDER:
        return []
    name = str(inputs.get("skill") or "")
    folder = draft_folder(ctx.settings.home, build_id, name)
    if not folder.exists():
        with transaction(ctx.database_url) as session:
            build = builds.get(session, build_id)
            plan = builds.plan_of(build) if build is not None else None
        planned = plan.skill(name) if plan is not None else None
        if planned is not None:
            write_folder(folder, skill_files(planned))
    bash = BashTool(replace(skill, folder=folder), row_id, {}, timeout_s=BASH_TIMEOUT_S,
                    max_output_bytes=ctx.settings.max_output_bytes,
                    sandbox=sandboxes.current(ctx.settings))
    # its runs of the draft's cases are waited for as execute_skill's are
    tests = DraftTests(ctx.database_url, row_id, build_id, folder, waiting=calls.waiting)
    return [*DraftFolder(folder, MAX_DRAFT_FILE_BYTES).tools(), bash.tool(), *tests.tools()]


def builder_ended(ctx: WorkerContext, skill: Skill, inputs: Mapping[str, Any]) -> None:
    """A builder answered: its draft into the artifact store, with its hash, for the gate
    to hold against the hash its cases last passed with (a change after them is not a
    tested draft)."""
    if skill.name != BUILDER:
        return
    build_id, name = str(inputs.get("build") or ""), str(inputs.get("skill") or "")
    folder = draft_folder(ctx.settings.home, build_id, name)
    with transaction(ctx.database_url) as session:
        build = builds.get(session, build_id, for_update=True)
        if build is not None and folder.is_dir():
            builds.record_skill(build, name, {"draft": pack_folder(session, folder)})
