"""A build's agent steps as the step runner sees them (workers/agent/step.py): the tools
the planner and a builder get beyond an agent step's own, and what a builder's step
records when it ends.

A builder's draft folder is made from the approved plan on the machine that builds it
(shared/build_compile.py's starting files), the first time its step runs there.
"""

from __future__ import annotations

import json
import shutil
import stat
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic_ai import Tool

from lifecycle import builds
from lifecycle.context import WorkerContext
from shared.build_compile import benchmarks, skill_files, skill_plan_md, write_folder
from shared.build_plan import PlannedSkill
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
from workers.agent.screen_tools import ScreenTools
from workers.agent.tool_journal import ToolJournal
from workers.agent.web_tool import WebFetch
from workers.build.drafts import draft_folder

MAX_DRAFT_FILE_BYTES = 1024 * 1024  # a skill's own file: generated data stays out
BASH_TIMEOUT_S = 120.0
WEB_TIMEOUT_S = 20.0  # one page: a planner reads docs, it does not crawl
WEB_MAX_BYTES = 2 * 1024 * 1024


def build_tools(ctx: WorkerContext, skill: Skill, inputs: Mapping[str, Any], row_id: str,
                vault: Vault, calls: Calls) -> list[Tool[None]]:
    """The planner's update_plan; a builder's file, bash and test tools, and for a dom0 or
    cmd0 skill's builder a look at a page or the screen (screen_tools.py); else none."""
    if skill.name not in (PLANNER, BUILDER):
        return []
    build_id = str(inputs.get("build") or "")
    with transaction(ctx.database_url) as session:
        build = builds.get(session, build_id)
        plan = builds.plan_of(build) if build is not None else None
        improves, daemon = (build.improves, build.daemon) if build is not None else (None, None)
    if skill.name == PLANNER:
        tools = [PlanTool(ctx.database_url, build_id, dict(vault.skills),
                          improving=frozenset({improves} if improves else ())).tool()]
        if ctx.settings.build_web_access:  # the deployment's choice: off by default
            journal = ToolJournal(ctx.database_url, row_id)  # a page may change meanwhile
            tools.append(journal.durable(WebFetch(WEB_TIMEOUT_S, WEB_MAX_BYTES).tool()))
        return tools
    name = str(inputs.get("skill") or "")
    folder = draft_folder(ctx.settings.home, build_id, name)
    planned = plan.skill(name) if plan is not None else None
    if not folder.exists() and planned is not None:
        _start_folder(folder, planned, vault if name == improves else None)
    bash = BashTool(replace(skill, folder=folder), row_id, {}, timeout_s=BASH_TIMEOUT_S,
                    max_output_bytes=ctx.settings.max_output_bytes,
                    sandbox=sandboxes.current(ctx.settings))
    # its runs of the draft's cases are waited for as execute_skill's are
    tests = DraftTests(ctx.database_url, row_id, build_id, folder, daemon=daemon,
                       eval_runs=ctx.settings.build_eval_runs, waiting=calls.waiting)
    journal = ToolJournal(ctx.database_url, row_id)
    answered = [journal.durable(t, redo=t.name == "write_file") for t in
                [*DraftFolder(folder, MAX_DRAFT_FILE_BYTES).tools(), bash.tool(),
                 *tests.tools()] if t.name != "run_tests"]
    if planned is not None:  # each call under the machine's dom0/cmd0 lock, not the step
        screen = ScreenTools(ctx.settings.home, ctx.database_url, ctx.settings.chromium_path)
        answered += [journal.durable(t) for t in screen.tools(planned.approach)]
    # run_tests finds its runs by its call already (build_tools.py)
    return [*answered, *(t for t in tests.tools() if t.name == "run_tests")]


def _start_folder(folder: Path, planned: PlannedSkill, improved: Vault | None) -> None:
    """A new sub-skill starts from the plan; a new version of a vault's skill (--from-note)
    from its current files, with the plan beside them."""
    current = improved.skills.get(planned.name) if improved is not None else None
    if current is None:
        write_folder(folder, skill_files(planned))
        return
    shutil.copytree(current.folder, folder, ignore=shutil.ignore_patterns(
        ".*", "__pycache__"))
    for path in folder.rglob("*"):  # a published folder is read-only: its draft is not
        path.chmod(path.stat().st_mode | stat.S_IWUSR)
    folder.chmod(folder.stat().st_mode | stat.S_IWUSR)
    write_folder(folder, {"plan.md": skill_plan_md(planned),
                          "benchmarks.json": _with_planned_tests(folder, planned)})


def _with_planned_tests(folder: Path, planned: PlannedSkill) -> str:
    """Its benchmarks.json with the plan's test cases added (one of the same id is kept
    as it was): the note's failure among them."""
    path = folder / "benchmarks.json"
    doc = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else \
        benchmarks(planned)
    tests = list(doc.get("tests") or [])
    known = {t.get("id") for t in tests}
    tests += [t.model_dump(mode="json") for t in planned.tests if t.id not in known]
    return json.dumps({**doc, "tests": tests}, indent=2) + "\n"


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
