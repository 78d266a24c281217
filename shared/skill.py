"""Reading one skill folder: SKILL.md (+ skill.yaml), benchmarks.json, sub-skills.json.

A folder loads in one of three forms:
  - bot0: every field in SKILL.md's frontmatter, as the seed design writes it;
  - agentskills: SKILL.md holds only the Agent Skills fields, skill.yaml the rest;
  - plain: an Agent Skills folder with no execution fields (an instruction-only skill).
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from shared import agentskills
from shared.kept_fields import set_aside
from shared.locate import Locator, field_name
from shared.manifest import EXECUTION_FIELDS, SPEC_FIELDS, Manifest
from shared.problems import Problem, display_path
from shared.pydantic_problems import problems_from
from shared.skillfiles import Benchmarks, SubSkills
from shared.valuetypes import json_trouble, unstorable_at
from shared.yamlload import Loc, Parsed, YamlProblem, load_mapping

SIDECAR = "skill.yaml"
BENCHMARKS = "benchmarks.json"
SUB_SKILLS = "sub-skills.json"
M = TypeVar("M", bound=BaseModel)
_TEXT_FIELDS = frozenset(SPEC_FIELDS | {"label"})


class SkillForm(StrEnum):
    BOT0 = "bot0"
    AGENTSKILLS = "agentskills"
    PLAIN = "plain"


@dataclass(frozen=True)
class Skill:
    name: str
    folder: Path
    manifest: Manifest
    body: str
    form: SkillForm
    skill_md: Path
    locator: Locator
    benchmarks: Benchmarks | None = None
    sub_skills: SubSkills | None = None
    # Top-level fields that were invalid and left out, so later checks do not echo them.
    repaired: frozenset[str] = frozenset()
    # What skillq ignores but keeps (shared/kept_fields.py): never a reason not to run.
    warnings: tuple[Problem, ...] = ()

    def problem(self, loc: Loc, message: str) -> Problem:
        return self.locator.problem(loc, message)

    def file_problem(self, filename: str, field: str, message: str) -> Problem:
        return Problem(display_path(self.folder / filename), field, message)


def is_skill_folder(path: Path) -> bool:
    return agentskills.find_skill_md(path) is not None or (path / SIDECAR).is_file()


def read_text(path: Path) -> str:
    """UTF-8 text (a leading BOM dropped); YamlProblem naming the bad byte otherwise."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        raise YamlProblem(f"is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset "
                          f"{exc.start}); save the file as UTF-8") from None


def split_frontmatter(text: str) -> tuple[str, str, int]:
    """(yaml text, markdown body, line number of the first yaml line)."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].rstrip() != "---":
        raise YamlProblem("must start with a '---' line, then the YAML frontmatter, then "
                          "another '---' line", 1)
    for i in range(1, len(lines)):
        if lines[i].rstrip() == "---":
            return "".join(lines[1:i]), "".join(lines[i + 1:]).strip("\n"), 2
    raise YamlProblem("frontmatter is not closed: add a '---' line after the YAML fields", 1)


def load_skill(folder: Path, *, strict: bool = False) -> tuple[Skill | None, list[Problem]]:
    """The skill in ``folder`` and every problem found reading it (None when unusable);
    ``strict`` refuses the fields skillq would keep without using (`validate --strict`)."""
    problems: list[Problem] = []
    skill_md = agentskills.find_skill_md(folder)
    if skill_md is None:
        return None, [Problem(display_path(folder), "SKILL.md",
                              "missing; every folder in a vault is a skill and needs a SKILL.md "
                              "(`skillq new NAME` scaffolds one)")]
    md_name = display_path(skill_md)
    try:
        front_text, body, first = split_frontmatter(read_text(skill_md))
        front = load_mapping(front_text, first_line=first, raw_text_keys=_TEXT_FIELDS)
    except YamlProblem as exc:
        field = "frontmatter" if exc.line is not None else "(file)"
        return None, [Problem(md_name, field, exc.message, exc.line)]

    locator = Locator(skill_md)
    locator.add(skill_md, front)
    data = dict(front.data)
    form = SkillForm.BOT0 if set(data) & EXECUTION_FIELDS else SkillForm.PLAIN
    sidecar = folder / SIDECAR
    sidecar_keys: set[str] = set()
    if sidecar.is_file():
        form = SkillForm.AGENTSKILLS
        side = _load_sidecar(sidecar, front, problems)
        if side is None:  # half a manifest would blame every caller of this skill
            return None, problems
        locator.add(sidecar, side)
        sidecar_keys = set(side.data)
        data.update({k: v for k, v in side.data.items() if k not in SPEC_FIELDS})

    aside = set_aside(data, front_keys=set(front.data), sidecar_keys=sidecar_keys,
                      strict=strict, problem=locator.problem)
    problems.extend(aside.problems)
    if aside.kept:
        data["kept"] = aside.kept

    for check, key in ((agentskills.name_problems, "name"),
                       (agentskills.description_problems, "description"),
                       (agentskills.compatibility_problems, "compatibility")):
        if key in data:
            arg: Any = (data[key], folder.name) if key == "name" else (data[key],)
            problems.extend(locator.problem((key,), msg) for msg in check(*arg))

    repaired: frozenset[str] = frozenset()
    try:
        manifest = Manifest.model_validate(data)
    except ValidationError as exc:
        problems.extend(problems_from(exc, Manifest, locator.problem))
        found = _repaired(data, exc, folder.name)
        if found is None:
            return None, _dedupe(problems)
        manifest, repaired = found

    skill = Skill(name=manifest.name, folder=folder, manifest=manifest, body=body, form=form,
                  skill_md=skill_md, locator=locator, repaired=repaired,
                  warnings=tuple(aside.warnings),
                  benchmarks=_load_json(folder / BENCHMARKS, Benchmarks, problems),
                  sub_skills=_load_json(folder / SUB_SKILLS, SubSkills, problems))
    return skill, _dedupe(problems)


def _repaired(data: dict[str, Any], exc: ValidationError, folder_name: str
              ) -> tuple[Manifest, frozenset[str]] | None:
    """The manifest with each failing field dropped (or, when required, set to a neutral
    value), so the remaining checks still run and one pass reports every problem.

    Returns the manifest and the top-level fields it had to touch, so checks that would
    only echo the same mistake can stay quiet.
    """
    neutral = {"type": "object", "description": "", "name": folder_name}
    data = copy.deepcopy(data)
    touched: set[str] = set()
    errors = exc.errors()
    for _ in range(2):
        for err in errors:
            loc = err["loc"]
            container: Any = data
            for part in loc[:-1]:
                try:
                    container = container[part]
                except (KeyError, IndexError, TypeError):
                    return None
            if not isinstance(container, dict):
                return None
            key = str(loc[-1])
            if err["type"] == "missing":
                if key not in neutral:
                    return None
                container[key] = neutral[key]
            else:
                container.pop(key, None)
            touched.add(str(loc[0]))
        try:
            return Manifest.model_validate(data), frozenset(touched)
        except ValidationError as again:
            errors = again.errors()
    return None


def _dedupe(problems: list[Problem]) -> list[Problem]:
    return list(dict.fromkeys(problems))


def _load_sidecar(path: Path, front: Parsed, problems: list[Problem]) -> Parsed | None:
    try:
        side = load_mapping(read_text(path))
    except YamlProblem as exc:
        problems.append(Problem(display_path(path), "(file)", exc.message, exc.line))
        return None
    for key in sorted(set(side.data) & SPEC_FIELDS):
        problems.append(Problem(display_path(path), key, "is an Agent Skills field; it belongs in "
                                "SKILL.md's frontmatter, not in skill.yaml", side.line((key,))))
    for key in sorted(set(front.data) & EXECUTION_FIELDS):
        problems.append(Problem(display_path(path.parent / "SKILL.md"), key,
                                "beside a skill.yaml, SKILL.md holds only the Agent Skills "
                                "fields; move this field to skill.yaml", front.line((key,))))
    return side


def _stored_part(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` without its test cases' inputs: those are a run's inputs, checked where
    every run's are (shared/inputs.py), and a case expecting failure may give bad ones
    on purpose. The rest (ids, names, expectations) is recorded as it is written."""
    tests = data.get("tests")
    if not isinstance(tests, list):
        return data
    return {**data, "tests": [{k: v for k, v in t.items() if k != "inputs"}
                              if isinstance(t, dict) else t for t in tests]}


def _load_json(path: Path, model: type[M], problems: list[Problem]) -> M | None:
    if not path.is_file():
        return None
    shown = display_path(path)
    try:
        data = json.loads(read_text(path))
    except YamlProblem as exc:
        problems.append(Problem(shown, "(file)", exc.message))
        return None
    except json.JSONDecodeError as exc:
        problems.append(Problem(shown, "(file)", f"is not valid JSON: {exc.msg}", exc.lineno))
        return None
    except (ValueError, RecursionError) as exc:  # a number of thousands of digits, nesting
        problems.append(Problem(shown, "(file)", json_trouble(exc)))
        return None
    if not isinstance(data, dict):
        problems.append(Problem(shown, "(file)", "must hold one JSON object"))
        return None
    if found := unstorable_at(_stored_part(data)):  # a "\u0000" escape, say
        where, why = found
        problems.append(Problem(shown, where or "(file)", why))
        return None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems.extend(problems_from(
            exc, model, lambda loc, msg: Problem(shown, field_name(loc), msg)))
        return None
