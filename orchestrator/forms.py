"""Converting a skill between its on-disk forms.

- agentskills: SKILL.md holds the six Agent Skills fields, so the reference validator and
  any Agent Skills client accept it; the execution fields go to skill.yaml beside it.
- bot0: one SKILL.md with every field in its frontmatter, as the seed design writes it.

Either way SKILL.md also keeps, as written, the fields Claude Code reads there:
disable-model-invocation and every field skillq kept without using (Manifest.kept), so
exporting a Claude Code skill never changes what Claude Code does with it. The reference
validator refuses those, as it refused them in the folder exported.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from shared import agentskills
from shared.atomic import write_json, write_text
from shared.errors import ExportError
from shared.manifest import FRONTMATTER_FIELDS, SPEC_FIELDS, Manifest
from shared.problems import display_path
from shared.skill import SIDECAR, SUB_SKILLS, Skill
from shared.skillfiles import SubSkillRef, SubSkills

_MANIFEST_FILES = {"SKILL.md", "skill.md", SIDECAR}


def manifest_fields(manifest: Manifest) -> dict[str, Any]:
    """The fields as written (defaults left out), in the model's order, then the kept
    ones as they were read, JSON-typed."""
    fields = manifest.model_dump(mode="json", by_alias=True, exclude_unset=True)
    return {**fields, **{k: _plain(v) for k, v in manifest.kept.items()}}


def client_fields(manifest: Manifest) -> list[str]:
    """SKILL.md's fields outside the specification that an export keeps there."""
    return [k for k in manifest_fields(manifest)
            if k in FRONTMATTER_FIELDS - SPEC_FIELDS or k in manifest.kept]


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return value


def _yaml(data: dict[str, Any]) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, default_flow_style=False,
                          width=100)


def write_skill(skill: Skill, dest: Path, form: str) -> Path:
    """Write ``skill`` into ``dest/<name>/`` in ``form``; never overwrites a folder."""
    target = dest / skill.name
    if target.exists():
        raise ExportError(f"{display_path(target)} already exists; choose an empty OUT folder")
    fields = manifest_fields(skill.manifest)
    body = skill.body.strip("\n") + "\n"
    staging = dest / f".{skill.name}.partial"
    shutil.rmtree(staging, ignore_errors=True)
    top = str(skill.folder)
    # Only the top-level manifest files are rewritten; a bundled assets/**/SKILL.md stays.
    shutil.copytree(skill.folder, staging,
                    ignore=lambda d, names: [n for n in names if n == "__pycache__"
                                             or (d == top and n in _MANIFEST_FILES)])
    client = client_fields(skill.manifest)
    if form == "agentskills":
        front = agentskills.spec_frontmatter(fields)
        if client:  # YAML typed as skillq reads it back: `true` stays a boolean
            front += _yaml({k: fields[k] for k in client})
        write_text(staging / "SKILL.md", f"---\n{front}---\n\n{body}")
        execution = {k: v for k, v in fields.items() if k not in SPEC_FIELDS
                     and k not in client}
        if execution:
            write_text(staging / SIDECAR, _yaml(execution))
    else:
        ordered: dict[str, Any] = {k: fields[k] for k in ("name", "description") if k in fields}
        ordered.update({k: v for k, v in fields.items() if k not in ordered})
        write_text(staging / "SKILL.md", f"---\n{_yaml(ordered)}---\n\n{body}")
    staging.rename(target)
    if form == "agentskills":
        # Refused for the client fields, as in the folder exported (strictyaml may refuse
        # how YAML writes an empty one, `[]`, too): the check is of what this module adds.
        problems = [p for p in agentskills.validate_agentskills(target)
                    if p.field not in client and not (client and p.field == "frontmatter")]
        if problems:  # a bug in this module, not in the user's skill
            raise ExportError("exported folder fails the Agent Skills rules:\n"
                              + "\n".join(map(str, problems)))
    return target


def derived_sub_skills(skill: Skill, vault_skills: dict[str, Skill]) -> SubSkills:
    """sub-skills.json for an orchestrator: one entry per skill its steps call, roles kept."""
    roles = {s.skill_id: s.role for s in skill.sub_skills.sub_skills} if skill.sub_skills \
        else {}
    refs: list[SubSkillRef] = []
    for step in skill.manifest.calling_steps:
        name = step.skill_name
        if any(r.skill_id == name for r in refs):
            continue
        callee = vault_skills.get(name)
        role = roles.get(name) or (callee.manifest.description.split(". ")[0].strip()
                                   if callee else "")
        refs.append(SubSkillRef(skill_id=name, role=role))
    return SubSkills(sub_skills=tuple(refs))


def write_sub_skills(skill: Skill, sub: SubSkills) -> Path:
    path = skill.folder / SUB_SKILLS
    write_json(path, sub.model_dump(mode="json"))
    return path
