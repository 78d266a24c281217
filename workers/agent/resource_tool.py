"""``skill_resource``: the model reads a file its prompt listed but did not show.

A step's prompt inlines its skill's text companions within a budget and lists the rest
(``<skill_resources>``), as the ``skill`` tool does for the skills it loads. This tool
reads one of those listed files: only of the step's own skill or a skill it may load,
only a path that skill's folder lists (no ``..``, no symbolic link, nothing hidden), as
text, cut to a size the model can take.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

from pydantic_ai import Tool

from shared.agent_prompt.companions import read_text, skill_files
from shared.skill import Skill

NAME = "skill_resource"
MAX_CHARS = 50_000
DESCRIPTION = ("Read one of the files a skill lists under <skill_resources> (its scripts, "
               "references, assets): the skill's name and the file's path as listed.")
SCHEMA = MappingProxyType({
    "type": "object", "additionalProperties": False, "required": ["skill", "path"],
    "properties": {"skill": {"type": "string", "description": "The skill's name"},
                   "path": {"type": "string", "description": "The path as listed"}}})


@dataclass
class ResourceTool:
    skills: dict[str, Skill]  # the step's own skill and those it may load

    def read(self, skill: str, path: str) -> str:
        owner = self.skills.get(skill.strip().removeprefix("/"))
        if owner is None:
            return (f"error: no skill '{skill}' is available to this step; it may read the "
                    f"files of: {', '.join(sorted(self.skills))}")
        rel = path.strip().removeprefix("./")
        if rel not in skill_files(owner):
            return f"error: {owner.name} lists no file '{path}'"
        target = owner.folder / rel
        if target.is_symlink():
            return f"error: {owner.name}/{rel} is a link; it is not read"
        text = read_text(target)
        if text is None:
            return f"error: {owner.name}/{rel} is not text"
        cut = f"\n[... {len(text) - MAX_CHARS} more characters]" \
            if len(text) > MAX_CHARS else ""
        return text[:MAX_CHARS] + cut

    def tool(self) -> Tool[None]:
        return Tool.from_schema(self.read, name=NAME, description=DESCRIPTION,
                                json_schema=dict(SCHEMA))
