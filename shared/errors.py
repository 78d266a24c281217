"""Every error skillq raises on purpose, under one base class.

    SkillqError
     ├── ConfigError            settings or environment unusable (names the variable)
     ├── VaultError             the vault folder itself cannot be read
     │    └── SkillNotFound      a name that no skill in the vault has
     ├── ValidationFailed       one or more skills are invalid (carries every Problem)
     ├── InputError             inputs given to a run do not fit the skill's declared inputs
     └── ExportError            a skill cannot be written in the requested on-disk form

Control-flow signals (retry, skip an item) are not errors and do not live here.
The CLI turns any SkillqError into a message and an exit code, never a traceback.
"""

from __future__ import annotations

from collections.abc import Iterable

from shared.problems import Problem


class SkillqError(Exception):
    """Base of every error skillq raises on purpose."""

    exit_code: int = 1


class ConfigError(SkillqError):
    exit_code = 2


class VaultError(SkillqError):
    exit_code = 2


class SkillNotFound(VaultError):
    def __init__(self, name: str, vault: str, suggestion: str | None = None) -> None:
        hint = f"; did you mean '{suggestion}'?" if suggestion else "; `skillq list` shows them"
        super().__init__(f"no skill named '{name}' in vault {vault}{hint}")
        self.name = name


class ValidationFailed(SkillqError):
    def __init__(self, problems: Iterable[Problem]) -> None:
        self.problems = sorted(problems, key=Problem.sort_key)
        super().__init__("\n".join(str(p) for p in self.problems))


class InputError(SkillqError):
    """Bad run inputs: reported before anything is dispatched."""

    exit_code = 2

    def __init__(self, problems: Iterable[Problem]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


class ExportError(SkillqError):
    pass
