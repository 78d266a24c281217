"""The tools an agent step offers its model: names and parameter schemas, no behaviour.

Names and parameters are the seed's (``execute_skill`` from its section 2.3,
``skill_improvement_note`` from "Skill Improvement Notes", ``ask_question`` from its
Question-Asking Protocol, ``skill`` from seed 004), so a
skill written for the seed's daemon reads the same here. What each tool does lives with
the executor; this module is what the model is told.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from shared.manifest import Manifest
from shared.skill import Skill

SKILL = "skill"
EXECUTE_SKILL = "execute_skill"
IMPROVEMENT_NOTE = "skill_improvement_note"
BASH = "bash"
ASK_QUESTION = "ask_question"


@dataclass(frozen=True, slots=True)
class ToolSpec:
    name: str
    description: str
    parameters: Mapping[str, Any]  # JSON schema of the arguments object


def _schema(properties: dict[str, Any], required: list[str]) -> Mapping[str, Any]:
    return MappingProxyType({"type": "object", "properties": properties,
                             "required": required, "additionalProperties": False})


SKILL_TOOL = ToolSpec(
    SKILL,
    "Load a skill's full instructions, its inputs and outputs, and the list of its files. "
    "Use it before acting on a skill from <available_skills>.",
    _schema({"name": {"type": "string", "description": "The skill's name, bare or as /slug "
                      "(e.g. text-summarizer or /text-summarizer)"}}, ["name"]))

EXECUTE_SKILL_TOOL = ToolSpec(
    EXECUTE_SKILL,
    "Execute a published skill by name with given inputs; returns its outputs, or its "
    "error. It runs as its own step (any approach: a script, a browser, another agent).",
    _schema({"name": {"type": "string", "description": "Skill name"},
             "inputs": {"type": "object", "description": "Typed input parameters"},
             "model": {"type": "string", "description": "Optional model override"}},
            ["name"]))

IMPROVEMENT_NOTE_TOOL = ToolSpec(
    IMPROVEMENT_NOTE,
    "Document an issue with a skill for the user to fix later. Work around the failure "
    "first; never edit the skill.",
    _schema({"skill_name": {"type": "string"},
             "step": {"type": "string", "description": "Which SKILL.md step failed"},
             "error": {"type": "string", "description": "Error message or description"},
             "diagnosis": {"type": "string", "description": "Root cause analysis"},
             "suggested_fix": {"type": "string", "description": "How to fix this"},
             "inputs": {"type": "object", "description": "Inputs that triggered the failure"}},
            ["skill_name", "error", "diagnosis", "suggested_fix"]))

ASK_QUESTION_TOOL = ToolSpec(
    ASK_QUESTION,
    "Ask the user a question rather than guess (a preference, missing context, a format, "
    "which credentials to use). The step waits for the answer, then this returns it.",
    _schema({"question": {"type": "string", "description": "The question, on its own"},
             "choices": {"type": "array", "items": {"type": "string"},
                         "description": "Options to pick from, if any"},
             "free_text": {"type": "boolean", "description": "Whether an answer outside "
                           "the choices is taken (default: only when there are none)"},
             "default": {"type": "string", "description": "The answer to take if nobody "
                         "answers in time"}},
            ["question"]))

BASH_TOOL = ToolSpec(
    BASH,
    "Run a bash command in a scratch copy of this skill's folder (the working directory), "
    "under the step's timeout and limits; returns the exit code, stdout and stderr.",
    _schema({"command": {"type": "string", "description": "The command line to run"}},
            ["command"]))


def tools_for(manifest: Manifest, allowed: Collection[str], *, tool_calls: bool = True
              ) -> tuple[ToolSpec, ...]:
    """The tools a step of ``manifest`` is offered, given the skills it may use.

    ``skill`` and ``execute_skill`` only when there is a skill to name (a tool with no
    valid argument only invites made-up names); ``bash`` only when the skill asks for it
    (``offers_bash``); none for a model without tool calls.
    """
    if not tool_calls:
        return ()
    found = [SKILL_TOOL, EXECUTE_SKILL_TOOL] if allowed else []
    found.append(IMPROVEMENT_NOTE_TOOL)
    if offers_bash(manifest):
        found.append(BASH_TOOL)
    return tuple(found)


def offers_bash(manifest: Manifest) -> bool:
    """Whether a step of ``manifest`` gets the ``bash`` tool: ``tools_used`` lists it, or
    ``allowed-tools`` names Claude Code's Bash, bare or with a pattern (``Bash(git:*)``).
    A pattern is not enforced: every call runs in the step's sandbox, under its limits,
    whatever the command (workers/agent/bash_tool.py), which bounds it instead."""
    return BASH in manifest.tools_used or any(
        name == "Bash" or name.startswith("Bash(") for name in manifest.allowed_tool_names)


def allowed_skills(skill: Skill, vault: Mapping[str, Skill],
                   disabled: Collection[str] = ()) -> list[str]:
    """The skills a step of ``skill`` may load and execute, in catalog order.

    By default those its sub-skills.json lists, in its order: the declared DAG, so
    cycles, dependents and routing stay checkable before anything runs. ``catalog: all``
    opens every skill of the vault, by name. Either way a disabled skill, one the vault
    does not hold, one that sets ``disable-model-invocation`` (a person's to start, not a
    model's) and the skill itself are left out.
    """
    if skill.manifest.catalog == "all":
        names = sorted(vault)
    else:
        listed = skill.sub_skills.sub_skills if skill.sub_skills else ()
        names = list(dict.fromkeys(s.skill_id for s in listed))
    blocked = set(disabled)
    return [n for n in names if n in vault and n not in blocked and n != skill.name
            and not vault[n].manifest.disable_model_invocation]
