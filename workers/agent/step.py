"""An agent step as the step runner sees it: what the executor needs, gathered.

The skills the step may load and execute (its sub-skills.json, or every skill with
``catalog: all``), less those the library has disabled in the run's vault; its
execute_skill, skill_improvement_note and (where someone can answer) ask_question
tools; then the run.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lifecycle import waits
from lifecycle.context import WorkerContext
from shared.agent_prompt import tools_spec
from shared.agent_prompt.prompt import bare_prompt
from shared.agent_prompt.tools_spec import allowed_skills
from shared.attempt_id import AttemptId
from shared.builtin import ASK, TRY
from shared.db.models import PipelineRun
from shared.db.session import transaction
from shared.library_tokens import library_states
from shared.skill import Skill
from shared.vault import open_vault
from workers import sandbox as sandboxes
from workers.agent.ask_step import TextStream, prompt_builder
from workers.agent.bash_tool import BashTool
from workers.agent.build_step import build_tools, builder_ended
from workers.agent.calls import Calls
from workers.agent.executor import AgentOutcome, run_agent_step
from workers.agent.note_tool import NoteTool
from workers.agent.question_tool import Questions

BASH_TIMEOUT_S = 300.0  # one bash call: the step's own timeout still bounds them all


def run_step(ctx: WorkerContext, *, row_id: str, attempt: int, vault_root: Path,
             workdir: str | None, skill: Skill, inputs: Mapping[str, Any],
             secrets: Mapping[str, str], worker: str | None) -> AgentOutcome:
    attempt_id = AttemptId.parse(row_id)
    run_id = attempt_id.run_id
    vault = open_vault(vault_root, ttl_s=ctx.settings.discovery_ttl_s)
    with transaction(ctx.database_url) as session:
        run = session.get(PipelineRun, run_id)
        source = run.source if run is not None else "production"
        pipeline = run.skill if run is not None else skill.name
        planned = _planned(run.plan if run is not None else {}, attempt_id.step_id)
        asks = run is not None and waits.may_ask(waits.top_run(session, run).triggered_by,
                                                 skill.manifest.interactive)
        states = library_states(session, run.vault if run is not None else str(vault_root))
    agent = planned.get("agent") or {}
    if agent.get("bare"):
        return _bare(ctx, row_id, attempt, skill, inputs, agent)
    disabled = {name for name, state in states.items() if not state.enabled}
    # the test window's agent has the one skill tried, disabled or not: a person asked
    library = _tried(vault.skills, inputs) if skill.name == TRY else vault.skills
    names = list(library) if skill.name == TRY else \
        allowed_skills(skill, vault.skills, disabled)
    calls = Calls(ctx.database_url, row_id, caller=skill.name, source=source, vault=vault,
                  allowed=names, workdir=workdir)
    tools = [NoteTool(ctx.database_url, row_id, pipeline=pipeline, vault=vault,
                      secrets=secrets, worker=worker).tool()]
    if tools_spec.offers_bash(skill.manifest):
        tools.append(BashTool(skill, row_id, secrets, timeout_s=BASH_TIMEOUT_S,
                              max_output_bytes=ctx.settings.max_output_bytes,
                              sandbox=sandboxes.current(ctx.settings)).tool())
    tools.extend(build_tools(ctx, skill, inputs, row_id, vault, calls))
    asked = skill.name in (ASK, TRY)
    stream = TextStream(ctx.database_url, run_id) if asked else None
    # `skillq ask`'s prompt names what its model may use, a skill the person invoked
    # included even when no model is offered it (disable-model-invocation)
    usable = [s for n, s in sorted(library.items()) if n not in disabled or
              skill.name == TRY] if asked else [vault.skills[n] for n in names]
    try:
        outcome = run_agent_step(
            ctx, row_id=row_id, attempt=attempt, skill=skill, inputs=inputs,
            catalog_skills=usable,
            timeout_s=float(skill.manifest.timeout or ctx.settings.max_step_timeout_s),
            calls=calls, extra_tools=tools,
            questions=Questions(ctx.database_url, row_id, skill.name,
                                float(skill.manifest.question_timeout
                                      or ctx.settings.question_timeout_s),
                                secrets=secrets) if asks else None,
            requested_model=str(agent.get("requested") or "") or None,
            budget_usd=agent.get("budget_usd"),
            # the servers it was routed by: its skill's, and for an ask the invoked skills'
            mcp_servers=tuple((planned.get("requires") or {}).get("mcp") or ()) or None,
            prompt_for=prompt_builder(ctx.settings, skill, str(inputs.get("text", "")),
                                      library, states) if asked else None,
            text_output="answer" if asked else None, on_text=stream)
        if outcome.ok:
            builder_ended(ctx, skill, inputs)
        return outcome
    finally:
        if stream is not None:
            stream.close()


def _tried(skills: Mapping[str, Skill], inputs: Mapping[str, Any]) -> dict[str, Skill]:
    name = str(inputs.get("skill") or "")
    return {name: skills[name]} if name in skills else {}


def _bare(ctx: WorkerContext, row_id: str, attempt: int, skill: Skill,
          inputs: Mapping[str, Any], agent: Mapping[str, Any]) -> AgentOutcome:
    """An eval's ``--baseline none``: the step's request and model with no skill loaded,
    so no tools that would read or run one."""
    return run_agent_step(
        ctx, row_id=row_id, attempt=attempt, skill=skill, inputs=inputs, catalog_skills=[],
        timeout_s=float(skill.manifest.timeout or ctx.settings.max_step_timeout_s),
        requested_model=str(agent.get("requested") or "") or None,
        budget_usd=agent.get("budget_usd"), mcp_servers=(), bare=True,
        prompt_for=lambda _tool_calls: bare_prompt(skill, inputs))


def _planned(plan: Mapping[str, Any], step_id: str) -> Mapping[str, Any]:
    """The step as the run's plan stored it (shared/plan.py PlanStep): the model an
    execute_skill call asked for, the MCP servers it was routed by."""
    return next((s for s in plan.get("steps", []) if s.get("id") == step_id), {})
