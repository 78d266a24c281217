"""What an MCP client is shown of the vault: the enabled skills as a catalog, a skill's
instructions with its interface, and nothing of a disabled skill.

Progressive disclosure as seed 004 gives it: the listing carries names and descriptions
only; a client loads a body when it needs one (``load_skill``, or the skill's prompt).
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.library.reach import LibraryView, library_view
from shared.errors import LibraryError, SkillNotFound
from shared.skill import Skill
from shared.vault import Vault, open_vault


@dataclass(frozen=True)
class Library:
    vault: Vault
    view: LibraryView

    @classmethod
    def read(cls, root: Path, ttl_s: float) -> Library:
        vault = open_vault(root, ttl_s=ttl_s)
        return cls(vault, library_view(vault.root))

    def enabled(self) -> list[Skill]:
        """Valid, enabled skills, pinned ones first (what `skillq catalog` lists)."""
        names = [n for n, s in sorted(self.vault.skills.items())
                 if not self.vault.problems_in(s.folder) and self.view.state(n).enabled]
        return [self.vault.skills[n] for n in self.view.pinned_first(names)]

    def offered(self) -> list[Skill]:
        """What a client's model is offered (list_skills): the enabled skills but those
        that set disable-model-invocation, which a person still invokes as a prompt."""
        return [s for s in self.enabled() if not s.manifest.disable_model_invocation]

    def get(self, name: str) -> Skill:
        """An enabled skill by slug (a leading `/`, the chat token's, is dropped)."""
        slug = name.strip().removeprefix("/")
        skill = self.vault.skills.get(slug)
        if skill is None:
            close = difflib.get_close_matches(slug, list(self.vault.skills), n=1)
            raise SkillNotFound(slug, str(self.vault.root), close[0] if close else None)
        if not self.view.state(slug).enabled:
            raise LibraryError(f"skill '{slug}' is disabled; `skillq enable {slug}` lets it "
                               "run again")
        return skill


def listing(skill: Skill, view: LibraryView) -> dict[str, Any]:
    m = skill.manifest
    return {"name": skill.name, "label": view.label(skill.name, m.label),
            "description": " ".join(m.description.split()), "kind": str(m.kind),
            "inputs": [_port(i.name, str(i.type), i.required, i.description)
                       for i in m.inputs],
            "outputs": [_port(o.name, str(o.type), None, o.description)
                        for o in m.result_outputs]}


def _port(name: str, vtype: str, required: bool | None, description: str | None
          ) -> dict[str, Any]:
    port: dict[str, Any] = {"name": name, "type": vtype}
    if required is not None:
        port["required"] = required
    if description:
        port["description"] = " ".join(description.split())
    return port


def instructions(skill: Skill) -> str:
    """The body, then what running it takes (its inputs and outputs), as the agent
    runtime's ``skill`` tool shows a skill."""
    m = skill.manifest
    parts = [f'<skill_content name="{skill.name}">', skill.body.strip()]
    if m.inputs:
        parts += ["", "Declared inputs:"]
        for spec in m.inputs:
            how = "required" if spec.required else (
                f"default {json.dumps(spec.default)}" if spec.has_default else "optional")
            about = f": {' '.join(spec.description.split())}" if spec.description else ""
            parts.append(f"- {spec.name} ({spec.type}, {how}){about}")
    if m.result_outputs:
        parts += ["", "Declared outputs:" if m.outputs else "Outputs:"]
        parts += [f"- {o.name} ({o.type})" for o in m.result_outputs]
    parts += ["", f'skillq runs it on its own workers with the run_skill tool (name '
              f'"{skill.name}"), recorded like any run.', "</skill_content>"]
    return "\n".join(parts)
