"""What an agent step needs of a daemon: credentials for the provider of the model it
would run on there, and the MCP servers its skill requires. That model depends on the
daemon (its SKILLQ_AGENT_MODEL, unless the skill sets model_override), so it is worked
out per worker, from what each announced; so are the servers (each worker's own
SKILLQ_MCP_SERVERS).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from shared.errors import AgentError
from shared.mcp_servers import SETTING as MCP_SETTING
from shared.model_spec import AGENT_MODEL_SETTING, REQUIRED_VARIABLE, effective_model
from shared.plan import AgentModel


@dataclass(frozen=True)
class WorkerModels:
    """One live worker of a daemon, as it announced itself for agent steps."""

    queues: frozenset[str]
    providers: frozenset[str]  # whose credentials its environment holds
    agent_model: str | None  # its SKILLQ_AGENT_MODEL
    mcp_servers: frozenset[str] = frozenset()  # what its SKILLQ_MCP_SERVERS declares


def lack(worker: WorkerModels, agent: AgentModel) -> str | None:
    """What ``worker`` lacks to run the step (a setting to name), or None."""
    try:
        ref = effective_model(*agent.ref_args(worker.agent_model))
    except AgentError:
        if worker.agent_model and not agent.override:
            return (f"a valid {AGENT_MODEL_SETTING} (its value '{worker.agent_model}' is not "
                    "provider:name)")
        # A bad model of the skill's own is for `skillq validate`; here it is no model.
        return f"a model ({AGENT_MODEL_SETTING} unset there, and the skill names none)"
    if ref.provider in worker.providers:
        return None
    return f"{REQUIRED_VARIABLE[ref.provider]} (for model {ref})"


def lacks(workers: Iterable[WorkerModels], daemon: str, queue: str,
          agent: AgentModel | None, mcp: Iterable[str] = ()) -> list[str]:
    """What the daemon's workers taking ``queue`` lack: every one of them must have it,
    since a message on the daemon's queue goes to whichever of them is free."""
    own = f"{queue}@{daemon}"
    taking = [w for w in workers if queue in w.queues or own in w.queues]
    found = {f"MCP server '{name}' (declare it in {MCP_SETTING} there)"
             for w in taking for name in mcp if name not in w.mcp_servers}
    if agent is not None:
        found.update(lacked for w in taking if (lacked := lack(w, agent)) is not None)
    return sorted(found)
