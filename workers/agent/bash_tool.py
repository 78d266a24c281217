"""``bash``: an agent step runs a command, only when its ``tools_used`` lists ``bash`` or
its ``allowed-tools`` names Claude Code's Bash (tools_spec.offers_bash).

Each call runs through the script executor, as a script step would: a scratch copy of
the skill folder as its working directory, its own session and a scrubbed environment
(the skill's declared secrets and nothing of the worker's), the step's sandbox and
limits, a timeout that kills its
whole process group, and nothing it starts outliving it. A call starts from a fresh copy
of the folder (what one call writes is not there for the next: pass results through
stdout). The model gets the exit code and the tails of stdout and stderr.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic_ai import RunContext, Tool

from shared.agent_prompt import tools_spec
from shared.manifest import RunSpec
from shared.secrets import redact
from shared.skill import Skill
from workers import attempt_end
from workers.sandbox import Sandbox
from workers.script_executor import run_script

MAX_SHOWN = 4000  # characters of each stream the model is shown


@dataclass
class BashTool:
    skill: Skill
    row_id: str
    secrets: Mapping[str, str]
    timeout_s: float
    max_output_bytes: int
    sandbox: Sandbox | None = None  # as a script step's: workers/sandbox/

    def run(self, rc: RunContext[None], command: str) -> dict[str, Any]:
        argv = shlex.join(["bash", "-c", command])
        manifest = self.skill.manifest.model_copy(update={
            "run": RunSpec(command=argv, timeout=self.timeout_s, retries=0), "outputs": ()})
        call = f"{self.row_id}#{rc.tool_call_id}"
        try:
            done = run_script(self.skill.folder, manifest, {}, secrets=self.secrets,
                              timeout_s=self.timeout_s,
                              max_output_bytes=self.max_output_bytes,
                              extra_env={attempt_end.STEP_MARKER: self.row_id},
                              scratch=attempt_end.scratch_for(call), sandbox=self.sandbox)
        finally:
            attempt_end.end(call)  # what the command left running ends with it
        # The skill's own secrets are its to use, but not to echo into the conversation.
        return {"exit_code": done.exit_code, "status": done.status.value,
                "stdout": redact(done.stdout_tail[-MAX_SHOWN:], self.secrets),
                "stderr": redact(done.stderr_tail[-MAX_SHOWN:], self.secrets),
                "error": redact(done.error or "", self.secrets) or None}

    def tool(self) -> Tool[None]:
        spec = tools_spec.BASH_TOOL
        return Tool.from_schema(self.run, name=spec.name, description=spec.description,
                                json_schema=dict(spec.parameters), takes_ctx=True)
