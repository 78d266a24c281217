"""What `skillq ask`'s model reads: the built-in skill's instructions, the catalog of the
library's enabled skills, the instructions of the skills the person invoked with slash
tokens, and the request as sent (display tokens rewritten to slugs).

The client builds it for `--dry-run` and the dashboard's preview, the worker for the
request it sends, both from ``ask_prompt`` over the same library reading
(shared/library_tokens.py), so what a person previews is what goes out. The invoked
skills' instructions are part of this one prompt only: nothing here is stored.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass

from shared.agent_prompt.prompt import PROMPT_SETTING, StepPrompt, catalog, skill_content
from shared.agent_prompt.tools_spec import (
    EXECUTE_SKILL_TOOL,
    IMPROVEMENT_NOTE_TOOL,
    SKILL_TOOL,
    ToolSpec,
)
from shared.skill import Skill
from shared.slash_tokens import Entry, Resolution, TokenState, resolve

CHARS_PER_TOKEN = 4  # the estimate's rule of thumb: each model's tokenizer decides


@dataclass(frozen=True, slots=True)
class AskPrompt:
    prompt: StepPrompt
    resolution: Resolution
    tools: tuple[ToolSpec, ...]

    @property
    def estimate_tokens(self) -> int:
        """About how many input tokens the first request costs: system, user, tools."""
        tools = json.dumps([{"name": t.name, "description": t.description,
                             "parameters": dict(t.parameters)} for t in self.tools])
        return estimate_tokens(self.prompt.system + self.prompt.user + tools)


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def ask_prompt(ask: Skill, text: str, skills: Mapping[str, Skill],
               entries: Mapping[str, Entry], *, prompt_budget_chars: int,
               catalog_budget_chars: int, tool_calls: bool = True) -> AskPrompt:
    """The prompt of one `skillq ask` request over ``skills`` (the vault's), whose library
    states ``entries`` gives (token_entries). A model without tool calls gets seed 004's
    fallback: the catalog's bodies inline, as far as the prompt budget allows.

    A skill that sets ``disable-model-invocation`` is not in the catalog; the person may
    still invoke it with its /slug, which brings its instructions and lets the model
    load and execute it for this request."""
    resolution = resolve(text, entries)
    offered = [skills[n] for n in sorted(skills)
               if n != ask.name and n in entries and entries[n].enabled
               and not skills[n].manifest.disable_model_invocation]
    listed = catalog(offered, catalog_budget_chars, tool_calls=tool_calls)
    invoked = [s for s, state in _invoked(resolution) if state is TokenState.ENABLED]
    # the skills the tools may name: the catalog, and what the person invoked
    usable = (*listed.names, *(n for n in invoked if n not in listed.names)) \
        if tool_calls else listed.names
    inline = list(invoked)
    if not tool_calls:
        inline += [n for n in listed.names if n not in invoked]
    room = prompt_budget_chars - len(ask.body)
    bodies, left = [], []
    for name in inline:
        content = skill_content(skills[name])
        if len(content) <= room:
            bodies.append(content)
            room -= len(content)
        else:
            left.append(name)
    parts = [ask.body.strip(), listed.block]
    if invoked:
        parts.append("The person invoked " + ", ".join(f"/{n}" for n in invoked)
                     + ": follow " + ("its" if len(invoked) == 1 else "their")
                     + " instructions below for this request.")
    if not tool_calls and bodies:
        parts.append("This model cannot call tools: where a request needs one of these "
                     "skills, do its work yourself, following its instructions below.")
    system = "\n\n".join(p for p in (*parts, *bodies) if p)
    warnings = [w for w in (listed.warning,) if w]
    if left:
        warnings.append(f"the instructions of {', '.join(left)} did not fit in "
                        f"{prompt_budget_chars} characters ({PROMPT_SETTING}) and were left "
                        "out")
    tools = (SKILL_TOOL, EXECUTE_SKILL_TOOL, IMPROVEMENT_NOTE_TOOL) if tool_calls and \
        usable else (IMPROVEMENT_NOTE_TOOL,) if tool_calls else ()
    step = StepPrompt(system, resolution.text, usable, (), tuple(warnings))
    return AskPrompt(step, resolution, tools)


def _invoked(resolution: Resolution) -> list[tuple[str, TokenState]]:
    seen: dict[str, TokenState] = {}
    for token in resolution.tokens:
        seen.setdefault(token.slug, token.state)
    return list(seen.items())


def invoked_mcp_servers(resolution: Resolution, skills: Mapping[str, Skill]) -> tuple[str, ...]:
    """The MCP servers the skills a person invoked require (requires.mcp), in order: the
    ask's own step is routed by them and given their tools, since those skills'
    instructions become its own."""
    return tuple(dict.fromkeys(
        name for slug, _ in resolution.instructions if slug in skills
        for name in skills[slug].manifest.requires.mcp))

