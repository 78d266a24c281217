"""Running an agent step: a skill whose body is instructions, run by a model.

The step's prompt is its SKILL.md body and companions (prompt.py), its inputs the first
user message, its declared outputs the structured answer (outputs.py), validated with
one retry on an invalid answer. Every model request is a recorded turn (replay.py), so a
step that runs again (a redelivery, a retry) replays what was paid for. ``max_turns``
caps the requests, ``budget_usd`` the spend of the step item's turns, and the step's
``timeout`` its run. The tools of the MCP servers its skill requires (mcp_tools.py) are
the agent's like any other, under the same limits.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai import Agent, DeferredToolRequests, Tool
from pydantic_ai.exceptions import (
    ModelHTTPError,
    UnexpectedModelBehavior,
    UsageLimitExceeded,
)
from pydantic_ai.usage import UsageLimits

from lifecycle.context import WorkerContext
from shared.agent_prompt import tools_spec
from shared.agent_prompt.prompt import StepPrompt, build_prompt, skill_content
from shared.attempt_id import AttemptId
from shared.db.agent_turns import TurnKey
from shared.errors import AgentError
from shared.manifest import Manifest
from shared.skill import Skill
from shared.vault import open_skill
from workers.agent.calls import Calls
from workers.agent.mcp_tools import McpToolArguments, McpUnavailable, toolsets_for
from workers.agent.models import MissingCredentials, effective_model, model_for
from workers.agent.outputs import output_type, outputs_of
from workers.agent.question_tool import Questions, QuestionUnanswered
from workers.agent.replay import RecordedModel
from workers.agent.resource_tool import ResourceTool
from workers.agent.tool_args import BadArguments, ToolArguments
from workers.agent.turns import BudgetSpent, StepCancelled, Turns

log = logging.getLogger(__name__)

OUTPUT_RETRIES = 1  # an invalid structured answer is asked for once more, then it fails
# A tool call that did not fit (its arguments, an unknown tool) goes back to the model with
# what was wrong; small models may take a few tries. A good call to the tool starts its
# count again; one more misfit than this without one fails the step.
TOOL_RETRIES = 3
TRANSIENT_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504, 529})


# One event loop per process and thread, kept between steps, as the models are
# (models.model_for): a kept model's HTTP client is used on the loop it was last used on,
# and a new loop per step would make it build a new one. Per process: a forked pool
# process makes its own; per thread: two steps of a thread pool cannot share a loop.
_loops: dict[tuple[int, int], asyncio.AbstractEventLoop] = {}


def _loop() -> asyncio.AbstractEventLoop:
    key = (os.getpid(), threading.get_ident())
    loop = _loops.get(key)
    if loop is None or loop.is_closed():
        loop = _loops[key] = asyncio.new_event_loop()
    return loop


# The answer's model by skill and declared outputs, kept between steps: a new class per
# step would have Pydantic AI derive its schema anew for each step's agent as well.
_answer_types: dict[tuple[str, tuple[Any, ...], bool], Any] = {}
ANSWER_TYPES_KEPT = 256  # the oldest goes first


def _answer_type(m: Manifest, anonymous: bool = False) -> Any:
    key = (m.name, m.outputs, anonymous)
    found = _answer_types.get(key)
    if found is None:
        if len(_answer_types) >= ANSWER_TYPES_KEPT:
            _answer_types.pop(next(iter(_answer_types)), None)
        found = _answer_types[key] = output_type(m, anonymous=anonymous)
    return found


@dataclass
class AgentOutcome:
    ok: bool
    outputs: dict[str, Any] | None = None
    error: str | None = None
    error_kind: str | None = None
    transient: bool = False
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    turns_sent: int = 0
    turns_replayed: int = 0
    warnings: list[str] = field(default_factory=list)
    waiting_on: list[str] = field(default_factory=list)  # runs its execute_skill started
    waits: list[int] = field(default_factory=list)  # its open questions (ask_question)

    @property
    def waiting(self) -> bool:
        return bool(self.waiting_on or self.waits)


def _skill_tool(skill: Skill, vault_root: Any, allowed: list[str]) -> Tool[None]:
    def load(name: str) -> str:
        wanted = name.strip().removeprefix("/")
        if wanted not in allowed:
            return (f"error: no skill '{wanted}' is available to this step; it may load: "
                    f"{', '.join(allowed) or 'none'}")
        found = open_skill(vault_root, wanted)
        if found is None:
            return f"error: skill '{wanted}' is not in this worker's vault"
        return skill_content(found)

    spec = tools_spec.SKILL_TOOL
    return Tool.from_schema(load, name=spec.name, description=spec.description,
                            json_schema=dict(spec.parameters))


def run_agent_step(ctx: WorkerContext, *, row_id: str, attempt: int, skill: Skill,
                   inputs: Mapping[str, Any], catalog_skills: list[Skill],
                   timeout_s: float, calls: Calls | None = None,
                   questions: Questions | None = None,
                   extra_tools: Sequence[Tool[None]] = (),
                   requested_model: str | None = None,
                   budget_usd: float | None = None,
                   mcp_servers: Sequence[str] | None = None,
                   prompt_for: Callable[[bool], StepPrompt] | None = None,
                   text_output: str | None = None,
                   on_text: Callable[[str], None] | None = None,
                   bare: bool = False) -> AgentOutcome:
    """Run the step to its answer, or until it waits for the runs its execute_skill calls
    started (``waiting_on``); an outcome, never an exception for the model's faults.

    ``prompt_for(tool_calls)`` replaces the step's own prompt (`skillq ask`'s);
    ``text_output`` names the output a plain-text answer is recorded as; ``on_text`` is
    given the answer's text as the model streams it; ``mcp_servers`` those whose tools it
    gets (default: its skill's requires.mcp); ``questions`` its ask_question tool, when
    someone can answer; ``budget_usd`` a cap its caller set beside the skill's own."""
    attempt_id = AttemptId.parse(row_id)
    key = TurnKey(attempt_id.run_id, attempt_id.step_id, attempt_id.item)
    m = skill.manifest
    try:
        ref = effective_model(m.model, m.model_override, ctx.settings.agent_model,
                              requested_model)
    except AgentError as exc:
        return AgentOutcome(False, error=str(exc), error_kind="no_model")
    try:
        wrapped = model_for(ref)
    except MissingCredentials as exc:
        return AgentOutcome(False, error=f"model {ref} needs {exc.variable}, which this "
                            "worker does not have", error_kind="no_credentials")
    # A model without tool calls gets seed 004's fallback: the bodies it would have
    # loaded inline, and no tools (so no execute_skill: it cannot wait on sub-skills).
    tool_calls = bool(wrapped.profile.get("supports_tools", True))
    prompt = prompt_for(tool_calls) if prompt_for is not None else build_prompt(
        skill, inputs, catalog_skills,
        prompt_budget_chars=ctx.settings.agent_prompt_budget_chars,
        catalog_budget_chars=ctx.settings.agent_catalog_budget_chars, tool_calls=tool_calls)
    caps = [b for b in (m.budget_usd, budget_usd) if b is not None]
    turns = Turns(ctx.database_url, key, attempt, min(caps) if caps else None, row_id)
    model = RecordedModel(wrapped, turns, str(ref), on_text=on_text)
    allowed = list(prompt.catalog) if tool_calls else []
    # the vault's folder: a built-in skill's own folder (shared/builtin/) holds no others
    root = calls.vault.root if calls is not None else skill.folder.parent
    tools = [_skill_tool(skill, root, allowed)] if allowed else []
    if allowed and calls is not None:
        calls.allowed = allowed
        tools.append(calls.tool())
    if tool_calls:
        readable = {} if bare else {skill.name: skill, **{
            s.name: s for s in catalog_skills if s.name in allowed}}
        if readable:  # ``bare``: an eval's baseline, which loads no skill
            tools.append(ResourceTool(readable).tool())
        if questions is not None:
            tools.append(questions.tool())
        tools.extend(extra_tools)
    answer_type = str if text_output else _answer_type(m, anonymous=bare)
    outcome = AgentOutcome(False, warnings=list(prompt.warnings))
    # The MCP servers the skill requires (requires.mcp), as this daemon declares them;
    # opened by the agent's run, so their start and calls are inside its timeout.
    try:
        servers = toolsets_for((m.requires.mcp if mcp_servers is None else mcp_servers)
                               if tool_calls else (),
                               ctx.settings.mcp_servers.get_secret_value(),
                               timeout_s=timeout_s, retries=TOOL_RETRIES)
    except McpUnavailable as exc:
        outcome.error, outcome.error_kind = str(exc), "mcp_unavailable"
        return outcome
    # ToolArguments: every tool's arguments are checked against its schema, whoever built it
    agent: Agent[None, Any] = Agent(model, output_type=[answer_type, DeferredToolRequests],
                                    instructions=prompt.system, tools=tools,
                                    toolsets=servers,
                                    capabilities=[McpToolArguments() if servers
                                                  else ToolArguments()],
                                    retries={"output": OUTPUT_RETRIES, "tools": TOOL_RETRIES})
    limits = UsageLimits(request_limit=m.max_turns) if m.max_turns else None
    try:
        result = _loop().run_until_complete(asyncio.wait_for(
            agent.run(prompt.user, usage_limits=limits), timeout=timeout_s))
        if isinstance(result.output, DeferredToolRequests):
            # only execute_skill and ask_question defer
            outcome.waiting_on = list(dict.fromkeys(calls.waiting)) if calls else []
            outcome.waits = list(dict.fromkeys(questions.waiting)) if questions else []
        else:
            outcome.ok = True
            outcome.outputs = {text_output: result.output} if text_output else \
                outputs_of(result.output)
    except BudgetSpent as exc:
        outcome.error, outcome.error_kind = str(exc), "budget"
    except McpUnavailable as exc:  # a server down may be up for the next attempt
        outcome.error, outcome.error_kind, outcome.transient = (str(exc), "mcp_unavailable",
                                                                True)
    except QuestionUnanswered as exc:
        outcome.error, outcome.error_kind = str(exc), "question_unanswered"
    except StepCancelled as exc:  # its record is the cancellation's: this one is refused
        outcome.error, outcome.error_kind = str(exc), "cancelled"
    except UsageLimitExceeded as exc:
        outcome.error = f"max_turns of {m.max_turns} reached: {exc}"
        outcome.error_kind = "max_turns"
    except TimeoutError:
        outcome.error, outcome.error_kind = f"timed out after {timeout_s:g} s", "timeout"
    except UnexpectedModelBehavior as exc:
        if isinstance(exc.__cause__, BadArguments):
            outcome.error = (f"the model called {exc.__cause__.tool} with arguments that "
                             f"did not fit {TOOL_RETRIES + 1} times without a good call "
                             f"between; the last: {'; '.join(exc.__cause__.problems)}")
            outcome.error_kind = "bad_tool_call"
        else:
            outcome.error = f"the model's answer did not fit the declared outputs: {exc}"
            outcome.error_kind = "bad_output"
    except ModelHTTPError as exc:
        outcome.error = f"model {ref}: HTTP {exc.status_code}: {str(exc.body)[:300]}"
        outcome.error_kind = "model_http"
        outcome.transient = exc.status_code in TRANSIENT_STATUS
    except Exception as exc:  # a bug still charges the turns it paid for (run-show, ask)
        log.exception("agent step %s failed", row_id)
        outcome.error = f"internal error: {type(exc).__name__}: {exc}"
        outcome.error_kind = "internal"
    outcome.turns_sent, outcome.turns_replayed = model.sent, model.replayed
    # The step item's own turns, however many attempts paid for them: only the final
    # attempt's row counts toward the skill's totals.
    outcome.tokens_in = sum(t.tokens_in for t in turns.rows.values())
    outcome.tokens_out = sum(t.tokens_out for t in turns.rows.values())
    outcome.cost_usd = turns.cost_usd
    return outcome
