"""What an agent step's model reads: its system prompt, its first user message, and the
content the ``skill`` tool returns.

The system prompt is the skill itself, wrapped as the ``skill`` tool wraps any skill
(``<skill_content>``): SKILL.md's body, the skill's inputs and outputs, its text
companions within the prompt budget and its other files by relative path
(shared/agent_prompt/companions.py). Then the catalog of the skills the step may load and
run, in the Agent Skills client guide's ``<available_skills>`` form, within its own
budget. Whatever a budget cuts is returned as a warning for the step's record.

The inputs go in the first user message as JSON, the declared ones only: the step sees
the data it was given, nothing else of the pipeline (seed 000, "When to Use Agentic
Steps").

A model without tool calls gets the fallback of seed 004: the bodies of the catalog's
skills this one names, inline, since it cannot fetch them later.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from shared.agent_prompt.companions import Companions, companion_block, companions, skill_files
from shared.agent_prompt.tools_spec import EXECUTE_SKILL, SKILL
from shared.catalog import CatalogEntry, catalog_xml, skill_xml
from shared.inputs import with_defaults
from shared.skill import Skill

CATALOG_SETTING = "SKILLQ_AGENT_CATALOG_BUDGET_CHARS"
PROMPT_SETTING = "SKILLQ_AGENT_PROMPT_BUDGET_CHARS"
_MAX_LISTED = 200  # a skill with thousands of assets still gets a readable list
_MAX_NAMED = 20  # names in a warning about what was cut


@dataclass(frozen=True, slots=True)
class Catalog:
    block: str  # instructions + <available_skills>; "" when the step may use no skill
    names: tuple[str, ...]  # the skills listed
    warning: str | None  # set when the list was cut: for the step's record


@dataclass(frozen=True, slots=True)
class StepPrompt:
    system: str
    user: str
    catalog: tuple[str, ...]  # the skills the model was shown
    resources: tuple[str, ...]  # the skill's files it was not shown in full
    warnings: tuple[str, ...]  # what was cut to fit a budget, for the step's record


def catalog(skills: Sequence[Skill], budget_chars: int, *, tool_calls: bool = True
            ) -> Catalog:
    """The skills a step may use, in the given order, cut where the ``<available_skills>``
    block would pass ``budget_chars``; the cut is named in ``warning``, never silent."""
    if not skills:
        return Catalog("", (), None)
    entries: list[CatalogEntry] = []
    size = len(catalog_xml([]))
    for skill in skills:
        entry = CatalogEntry(skill.name, skill.manifest.description)
        size += len(skill_xml(entry)) + 1
        if size > budget_chars:
            break
        entries.append(entry)
    warning = None
    if len(entries) < len(skills):
        left = [s.name for s in skills[len(entries):]]
        more = f" and {len(left) - _MAX_NAMED} more" if len(left) > _MAX_NAMED else ""
        warning = (f"the catalog of skills this step may use was cut to {len(entries)} of "
                   f"{len(skills)} to stay within {budget_chars} characters "
                   f"({CATALOG_SETTING}); left out: {', '.join(left[:_MAX_NAMED])}{more}")
    if not entries:
        return Catalog("", (), warning)
    how = (f"Call the `{SKILL}` tool with a skill's name to load its instructions, inputs "
           f"and outputs; call `{EXECUTE_SKILL}` with its name and inputs to run it as a "
           f"step of its own and get its outputs. Where these instructions say to call or "
           f"run one of these skills, use `{EXECUTE_SKILL}`." if tool_calls else
           "Their instructions follow the list, as far as this skill refers to them.")
    block = (f"The skills below are the ones this step may use. {how}\n"
             + catalog_xml(entries))
    return Catalog(block, tuple(e.name for e in entries), warning)


def skill_content(skill: Skill) -> str:
    """What the ``skill`` tool returns: the body, the skill's inputs and outputs (what
    ``execute_skill`` needs), and its files by relative path, none of them read."""
    return _wrap(skill, Companions((), tuple(skill_files(skill))))


def user_message(skill: Skill, inputs: Mapping[str, Any]) -> str:
    """The declared inputs (defaults applied) as JSON; anything else given is dropped."""
    values = with_defaults(skill.manifest, inputs)
    declared = {spec.name: values[spec.name] for spec in skill.manifest.inputs
                if spec.name in values}
    if not declared:
        return "This step has no inputs."
    return "The inputs of this step, as JSON:\n" + json.dumps(declared, ensure_ascii=False)


def build_prompt(skill: Skill, inputs: Mapping[str, Any], catalog_skills: Sequence[Skill], *,
                 prompt_budget_chars: int, catalog_budget_chars: int,
                 tool_calls: bool = True) -> StepPrompt:
    """The step's prompt: for a model with tool calls, the skill and the catalog (bodies
    come through the ``skill`` tool); without, ``fallback_prompt``."""
    if not tool_calls:
        return fallback_prompt(skill, inputs, catalog_skills,
                               prompt_budget_chars=prompt_budget_chars,
                               catalog_budget_chars=catalog_budget_chars)
    own = companions(skill, prompt_budget_chars)
    listed = catalog(catalog_skills, catalog_budget_chars)
    system = "\n\n".join(p for p in (_header(skill), _wrap(skill, own), listed.block) if p)
    return StepPrompt(system, user_message(skill, inputs), listed.names, own.resources,
                      tuple(w for w in (_budget_note(skill, own), listed.warning) if w))


BARE_SYSTEM = ("Answer the request below. Its inputs are given as JSON; give the outputs "
               "asked for.")


def bare_prompt(skill: Skill, inputs: Mapping[str, Any]) -> StepPrompt:
    """The same request with no skill loaded (an eval's ``--baseline none``): the step's
    inputs, and none of its instructions, files or catalog."""
    return StepPrompt(BARE_SYSTEM, user_message(skill, inputs), (), (), ())


def fallback_prompt(skill: Skill, inputs: Mapping[str, Any], catalog_skills: Sequence[Skill],
                    *, prompt_budget_chars: int, catalog_budget_chars: int) -> StepPrompt:
    """For a model that cannot call tools (seed 004's fallback disclosure): the catalog,
    then inline the bodies of the catalog's skills that this body names (``name`` or
    ``/name``); the others it could only have fetched, which it cannot."""
    own = companions(skill, prompt_budget_chars)
    listed = catalog(catalog_skills, catalog_budget_chars, tool_calls=False)
    room = prompt_budget_chars - len(skill.body) - own.size
    bodies, left = [], []
    for other in catalog_skills:
        if other.name not in listed.names or not mentions(skill.body, other.name):
            continue
        content = skill_content(other)
        if len(content) <= room:
            bodies.append(content)
            room -= len(content)
        else:
            left.append(other.name)
    note = ("This model cannot call tools: where these instructions say to call or run "
            "another skill, do that skill's work yourself, following its instructions "
            "below." if bodies else "")
    system = "\n\n".join(p for p in (_header(skill), _wrap(skill, own), listed.block, note,
                                     *bodies) if p)
    warnings = [w for w in (_budget_note(skill, own), listed.warning) if w]
    if left:
        warnings.append(f"the instructions of {', '.join(left)} did not fit in "
                        f"{prompt_budget_chars} characters ({PROMPT_SETTING}) and were "
                        "left out of this tool-less prompt")
    return StepPrompt(system, user_message(skill, inputs), listed.names, own.resources,
                      tuple(warnings))


def mentions(body: str, name: str) -> bool:
    """Whether ``body`` names the skill: ``name`` as a word of its own (`text-summarizer`,
    not docs/text-summarizer or text-summarizer-v2), or a ``/name`` token after a space."""
    word = re.escape(name)
    return re.search(rf"(?<![\w./-]){word}(?![\w-])|(?:^|(?<=\s))/{word}(?![\w-])",
                     body, re.M) is not None


def _header(skill: Skill) -> str:
    m = skill.manifest
    answer = ("When you are done, answer with its outputs: "
              + "; ".join(f"{o.name} ({o.type})" for o in m.outputs) + "."
              if m.outputs else "When you are done, answer in plain text.")
    return (f'You are running the skill "{skill.name}" ({m.display_label}) as one step of an '
            "automated skillq run: nobody answers questions while it runs, so decide, and "
            "keep to what the inputs support. The step's inputs are in the first user "
            f"message. Follow the skill's instructions below. {answer}")


def _wrap(skill: Skill, files: Companions) -> str:
    parts = [f'<skill_content name="{skill.name}">', skill.body.strip()]
    if interface := _interface(skill):
        parts += ["", interface]
    for rel, text in files.inlined:
        parts += ["", companion_block(rel, text)]
    if files.resources:
        shown = files.resources[:_MAX_LISTED]
        more = len(files.resources) - len(shown)
        parts += ["", "Relative paths in this skill are relative to its folder. Its other "
                  "files, not shown here:", "<skill_resources>",
                  *(f"  <file>{html.escape(rel)}</file>" for rel in shown),
                  *([f"  <!-- and {more} more -->"] if more else []), "</skill_resources>"]
    parts.append("</skill_content>")
    return "\n".join(parts)


def _interface(skill: Skill) -> str:
    m = skill.manifest
    lines = []
    if m.inputs:
        lines.append("Declared inputs:")
        for spec in m.inputs:
            how = "required" if spec.required else (
                f"default {json.dumps(spec.default)}" if spec.has_default else "optional")
            lines.append(f"- {spec.name} ({spec.type}, {how})"
                         + (f": {_flat(spec.description)}" if spec.description else ""))
    if m.outputs:
        lines.append("Declared outputs:")
        lines += [f"- {o.name} ({o.type})" + (f": {_flat(o.description)}" if o.description
                                              else "") for o in m.outputs]
    return "\n".join(lines)


def _budget_note(skill: Skill, own: Companions) -> str | None:
    skipped = own.over_budget
    if not skipped:
        return None
    return (f"{len(skipped)} text file(s) of {skill.name} did not fit in the prompt budget "
            f"({PROMPT_SETTING}) and are listed for the model to read instead: "
            + ", ".join(skipped[:_MAX_NAMED]) + (" ..." if len(skipped) > _MAX_NAMED else ""))


def _flat(text: str) -> str:
    return " ".join(text.split())
