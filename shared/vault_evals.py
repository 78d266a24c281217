"""A vault's eval settings: ``evals.json`` beside its skill folders, for what holds for
every skill in it (the judge model). A case's own setting wins over it; the daemon's
default model is the last resort."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError, field_validator

from shared.errors import AgentError, InputError
from shared.manifest import Frozen
from shared.model_spec import resolve
from shared.problems import Problem
from shared.pydantic_problems import problems_from

EVALS_FILE = "evals.json"


class VaultEvals(Frozen):
    judge_model: str | None = None  # provider:name, as a skill's `model:`

    @field_validator("judge_model")
    @classmethod
    def _known(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                resolve(value)
            except AgentError as exc:
                raise ValueError(str(exc)) from None
        return value


def vault_evals(root: Path) -> VaultEvals:
    """The vault's settings; none set when it has no evals.json. InputError naming the
    file and field when it cannot be read as one."""
    path = root / EVALS_FILE
    if not path.is_file():
        return VaultEvals()
    shown = str(path)
    try:
        return VaultEvals.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError([Problem(shown, "(whole file)", f"is not readable JSON ({exc}); write an "
                                  "object such as {\"judge_model\": \"anthropic:claude-haiku-"
                                  "4-5\"}")]) from None
    except ValidationError as exc:
        raise InputError(list(problems_from(
            exc, VaultEvals, lambda loc, text: Problem(
                shown, ".".join(str(p) for p in loc), text)))) from None
