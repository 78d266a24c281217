"""``skill_improvement_note``: an agent step documents a skill's failure for its user.

The seed's rule: the agent works around a failing skill and files a note, never an edit.
The note lands beside the notes production failures leave (`skillq notes`, the
dashboard), diagnosed by the model itself; a call replayed when the step runs again is
filed once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic_ai import RunContext, Tool

from shared.agent_prompt import tools_spec
from shared.attempt_id import AttemptId
from shared.db.session import transaction
from shared.notes import AgentReport, leave_agent_note
from shared.vault import Vault


@dataclass
class NoteTool:
    database_url: str
    row_id: str  # the calling attempt
    pipeline: str
    vault: Vault
    secrets: Mapping[str, str]
    worker: str | None = None

    def file(self, rc: RunContext[None], skill_name: str, error: str, diagnosis: str,
             suggested_fix: str, step: str | None = None,
             inputs: dict[str, Any] | None = None) -> str:
        name = skill_name.strip().removeprefix("/")
        skill = self.vault.skills.get(name)
        if skill is None:
            return f"error: no skill '{name}' in this vault; the note was not filed"
        report = AgentReport(
            skill=name, version=skill.manifest.version, step=step or "-", error=error,
            diagnosis=diagnosis, suggested_fix=suggested_fix, inputs=inputs or {},
            pipeline=self.pipeline, run_id=AttemptId.parse(self.row_id).run_id,
            step_run_id=f"{self.row_id}#{rc.tool_call_id}", worker=self.worker)
        with transaction(self.database_url) as session:
            note = leave_agent_note(session, report, secrets=self.secrets)
        return f"filed improvement note {note} on {name} (`skillq notes {name}`)"

    def tool(self) -> Tool[None]:
        spec = tools_spec.IMPROVEMENT_NOTE_TOOL
        return Tool.from_schema(self.file, name=spec.name, description=spec.description,
                                json_schema=dict(spec.parameters), takes_ctx=True)
