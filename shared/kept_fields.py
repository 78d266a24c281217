"""SKILL.md fields skillq keeps without using them, and what it says about each.

Claude Code loads a skill folder whatever else its frontmatter holds, and so does skillq:
  - Claude Code's own fields skillq does not use (``effort``, ``argument-hint``, ``hooks``,
    ... agentskills.CLAUDE_CODE_FIELDS) are kept as written in any form;
  - in a plain Agent Skills folder (no skill.yaml, none of skillq's execution fields but
    those other clients write too), any other field it does not know is kept too
    (trailofbits writes ``type: fuzzer``);
  - a Claude Code model alias (``model: sonnet``) is kept, and counts as no model.
Each is one warning line (`skillq validate`, `skillq show`) and never stops the skill from
running; an export writes kept fields back unchanged (Manifest.kept, orchestrator/forms.py).

``strict`` (`skillq validate --strict`) refuses them all instead, with the messages skillq
always gave. An unknown key stays an error in skill.yaml (skillq's own file) and in a
folder of the bot0 form: there it is a typo of a field meant to do something (`timout`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from shared.agentskills import (
    CLAUDE_CODE_FIELDS,
    DISABLE_MODEL_INVOCATION,
    METADATA_KEYS,
    unknown_field_hint,
)
from shared.errors import AgentError
from shared.manifest import EXECUTION_FIELDS, KNOWN_FIELDS
from shared.model_spec import alias_note, is_claude_code_alias, resolve
from shared.problems import Problem, did_you_mean
from shared.yamlload import Loc

_KEPT = "kept as written, exported unchanged, and ignored"
_CLIENTS_WRITE = frozenset({"model", "requires"})


@dataclass
class SetAside:
    kept: dict[str, Any] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)


def set_aside(data: dict[str, Any], *, front_keys: Collection[str],
              sidecar_keys: Collection[str], strict: bool,
              problem: Callable[[Loc, str], Problem]) -> SetAside:
    """Take every field skillq does not use out of ``data`` (SKILL.md's fields updated with
    skill.yaml's): the ones it keeps, the problems and the warnings about them."""
    found = SetAside()
    # A plain folder: an Agent Skills folder skillq adds nothing to. Other clients write
    # `model` (Claude Code) and `requires` (Composio's `requires: {mcp: [...]}`) too, so
    # neither makes a folder skillq's.
    plain = not sidecar_keys and not set(front_keys) & (EXECUTION_FIELDS - _CLIENTS_WRITE)
    for key in [k for k in data if k not in KNOWN_FIELDS]:
        value = data.pop(key)
        if key in sidecar_keys and key in CLAUDE_CODE_FIELDS and not strict:
            found.problems.append(problem((key,), _belongs_in_skill_md(key)))
        elif key in sidecar_keys or strict or not (plain or key in CLAUDE_CODE_FIELDS):
            found.problems.append(problem((key,), f"unknown field; "
                                          f"{unknown_field_hint(key, KNOWN_FIELDS)}"))
        else:
            found.kept[key] = value
            found.warnings.append(problem((key,), _ignored(key)))
    if DISABLE_MODEL_INVOCATION in sidecar_keys:
        data.pop(DISABLE_MODEL_INVOCATION, None)
        found.problems.append(problem((DISABLE_MODEL_INVOCATION,),
                                      _belongs_in_skill_md(DISABLE_MODEL_INVOCATION)))
    model = data.get("model")
    if isinstance(model, str) and is_claude_code_alias(model):
        if strict:
            found.problems.append(problem(("model",), _unplaced(model)))
        else:
            found.warnings.append(problem(("model",), alias_note(model)))
    return found


def _ignored(key: str) -> str:
    if key in CLAUDE_CODE_FIELDS:
        return f"a Claude Code field skillq does not use: {_KEPT}"
    if key in METADATA_KEYS:
        how = (f"the Agent Skills specification keeps '{key}' under metadata:, where "
               "skillq reads it")
    else:
        close = did_you_mean(key, KNOWN_FIELDS)
        how = f"did you mean '{close}'?" if close else \
            "no client skillq knows reads it (`skillq validate --strict` refuses it)"
    return f"unknown field: {_KEPT}; {how}"


def _belongs_in_skill_md(key: str) -> str:
    return (f"'{key}' is a Claude Code field; it belongs in SKILL.md's frontmatter, where "
            "Claude Code reads it, not in skill.yaml: move it there")


def _unplaced(model: str) -> str:
    """The refusal skillq gave a model alias before it kept them (checks._check_model)."""
    try:
        resolve(model)
    except AgentError as exc:
        return str(exc)
    return alias_note(model)  # never reached: no alias resolves
