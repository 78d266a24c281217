"""``execute_skill``: an agent step runs a sub-skill through the queues, holding no slot.

A call starts the sub-skill as a run of its own (``triggered_by`` the calling skill,
``parent_step_run_id`` the calling attempt, ``agent_call`` naming the step item and the
tool call), and the tool call is deferred (Pydantic AI's CallDeferred): the agent run
ends there, the step is recorded ``waiting`` and its worker slot is free, so nested
agents complete even on a worker of concurrency 1. When every run it waits for has ended,
the planner puts the step back in its queue; it runs again from the top, its turns
replayed (replay.py), and this time the call finds its run ended and returns its typed
outputs, or its error, to the model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic_ai import RunContext, Tool
from pydantic_ai.exceptions import CallDeferred
from sqlalchemy import select, update

from lifecycle.submit import create_run
from shared.agent_prompt import tools_spec
from shared.attempt_id import AttemptId
from shared.db.models import PipelineRun
from shared.db.session import transaction
from shared.errors import InputError, SkillqError
from shared.states import RunState
from shared.store import unpack
from shared.valuetypes import machine_path
from shared.vault import Vault


@dataclass
class Calls:
    """The execute_skill tool of one step attempt, and the runs it waits for."""

    database_url: str
    row_id: str  # the calling attempt: <run>/<step>/<item>/<attempt>
    caller: str  # the calling skill (the runs' triggered_by)
    source: str  # the calling run's source (production, test_window, build)
    vault: Vault
    allowed: list[str]
    workdir: str | None = None
    waiting: list[str] = field(default_factory=list)

    def execute_skill(self, rc: RunContext[None], name: str,
                      inputs: dict[str, Any] | None = None, model: str | None = None
                      ) -> dict[str, Any]:
        call = f"{AttemptId.parse(self.row_id).calls_prefix}{rc.tool_call_id}"
        # The run is committed before the call is deferred: raising inside the
        # transaction would roll its creation back.
        with transaction(self.database_url) as session:
            answer, waiting = self._call(session, call, name, inputs or {}, model)
        if waiting is not None:
            self.waiting.append(waiting)
            raise CallDeferred(metadata={"run_id": waiting})
        return answer

    def _call(self, session: Any, call: str, name: str, inputs: dict[str, Any],
              model: str | None) -> tuple[dict[str, Any], str | None]:
        """(the tool's answer, None) or ({}, the run to wait for)."""
        run = session.scalar(select(PipelineRun).where(PipelineRun.agent_call == call))
        if run is None:
            wanted = name.strip().removeprefix("/")
            if wanted not in self.allowed or wanted not in self.vault.skills:
                return {"error": f"no skill '{wanted}' is available to this step; it may "
                        f"execute: {', '.join(self.allowed) or 'none'}"}, None
            if (found := machine_path(inputs)) is not None:
                return {"error": f"inputs of {wanted}: {found} is a file or folder of a "
                        "machine, which only a person's command may give; pass text, or a "
                        "stored file ({\"$ref\": ...}) a step returned"}, None
            try:
                return {}, create_run(session, self.vault, self.vault.skills[wanted], inputs,
                                      source=self.source, triggered_by=self.caller,
                                      parent_step_run_id=self.row_id, workdir=self.workdir,
                                      agent_call=call, model=model)
            except InputError as exc:
                return {"error": f"inputs of {wanted}: {exc}"}, None
            except SkillqError as exc:
                return {"error": str(exc)}, None
        if not RunState(run.state).terminal:
            # started by an earlier attempt of this step: it wakes this one now
            session.execute(update(PipelineRun).where(PipelineRun.id == run.id)
                            .values(parent_step_run_id=self.row_id))
            return {}, str(run.id)
        if run.state == RunState.SUCCEEDED:
            return {"outputs": unpack(session, run.outputs)}, None
        return {"error": f"{run.skill} {run.state}: {run.error or 'no error recorded'}"}, None

    def tool(self) -> Tool[None]:
        spec = tools_spec.EXECUTE_SKILL_TOOL
        return Tool.from_schema(self.execute_skill, name=spec.name,
                                description=spec.description,
                                json_schema=dict(spec.parameters), takes_ctx=True)
