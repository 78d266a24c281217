"""The MCP server: the library as tools, each enabled skill's instructions as a prompt.

Tools, named and shaped after the agent runtime's (docs/agent-steps.md), so a client's
model meets skillq's skills the way an agent step does:

  list_skills       the catalog of enabled, valid skills: names, descriptions, interfaces
  load_skill        one skill's instructions and interface (the seed's ``skill`` tool)
  run_skill         run a skill through the queues, as `skillq run` does; its typed
                    outputs, or why it failed (the seed's ``execute_skill``)
  improvement_note  file a note on a skill that failed (the seed's
                    ``skill_improvement_note``): notes, never edits
  inbox             the open questions and approvals (of one run, or all), as `skillq
                    inbox` lists them
  answer            answer a run's question (text, or its choice N)
  approve           approve a run's approval step, with its inputs
  reject            reject a run's approval step, saying why

A run is recorded like any other (source ``production``, triggered by ``mcp``). While
run_skill follows it, a question or approval it opens is put to the client's user as a
form (elicitation) when the client says it shows forms (orchestrator/mcp/waits.py);
else it waits in the inbox for the tools above, the CLI or the dashboard. A
SkillqError reaches the client as the tool's error text (inputs that do not fit named by
run_skill's argument, ``inputs.title``, not by the CLI's ``--input``); anything else is
the SDK's "Error executing tool" and a traceback in this server's log, never the
client's.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.prompts.base import Prompt
from mcp.server.request_state import RequestStateSecurity
from mcp_types import InputRequiredResult

from orchestrator.mcp import waits
from orchestrator.mcp.library import Library, instructions, listing
from shared.errors import InputError, SkillqError, WaitError

if TYPE_CHECKING:
    from orchestrator.connect import Connection
    from shared.db.models import PipelineRun

RUN_TIMEOUT_S = 3600.0  # a client that waits longer gets the run id to look up
# A 2026-07-28 client's run_skill state outlives a person's answer to its form (the
# SDK's default is 10 min). It names the run and the waits asked, nothing more.
STATE_TTL_S = 24 * 3600.0


class Server:
    """The vault's MCP surface; the stack is connected to on the first run."""

    def __init__(self, root: Path, ttl_s: float) -> None:
        self.root, self.ttl_s = root, ttl_s
        self._conn: Connection | None = None

    def library(self) -> Library:
        return Library.read(self.root, self.ttl_s)

    def connection(self) -> Connection:
        if self._conn is None:
            from orchestrator.connect import connect

            self._conn = connect()  # the embedded default starts its workers, as `run` does
        return self._conn

    # -- the tools (blocking: each runs in a worker thread) ---------------------------

    def list_skills(self) -> list[dict[str, Any]]:
        library = self.library()
        return [listing(skill, library.view) for skill in library.offered()]

    def load_skill(self, name: str) -> str:
        return instructions(self.library().get(name))

    def start(self, name: str, inputs: dict[str, Any] | None) -> str:
        from orchestrator.launch import start_run
        from shared.inputs import local_paths

        library = self.library()
        skill = library.get(name)
        conn = self.connection()
        try:
            # This server runs on the client's machine: a file or folder input is a path
            # on it.
            given = local_paths(skill.manifest, inputs or {}, Path.cwd())
            run_id = start_run(conn, library.vault, skill, given, source="production",
                               triggered_by="mcp", workdir=str(Path.cwd()), waiting=True)
        except InputError as exc:
            raise SkillqError(inputs_message(exc, skill.name)) from None
        return run_id

    def result(self, run: PipelineRun) -> dict[str, Any]:
        from orchestrator.run_report import result_json

        return result_json(self.connection(), run)

    def inbox(self, run_id: str | None) -> list[dict[str, Any]]:
        from orchestrator.waits import inbox

        return [w.as_json() for w in inbox(self.connection(), run_id)]

    def answer(self, run_id: str, text: str | None, choice: int | None,
               which: str | int | None, by: str) -> dict[str, Any]:
        from orchestrator.waits import answer

        if (text is None) == (choice is None):
            raise WaitError("give the answer as text, or as choice N (one of them)")
        return asdict(answer(self.connection(), run_id, _which(which), text=text,
                             choice=choice, by=by))

    def approve(self, run_id: str, inputs: dict[str, Any] | None, which: str | int | None,
                by: str) -> dict[str, Any]:
        from orchestrator.waits import approve

        return asdict(approve(self.connection(), run_id, _which(which), given=inputs or {},
                              by=by))

    def reject(self, run_id: str, reason: str, which: str | int | None,
               by: str) -> dict[str, Any]:
        from orchestrator.waits import reject

        return asdict(reject(self.connection(), run_id, _which(which), reason=reason, by=by))

    def improvement_note(self, skill: str, error: str, diagnosis: str, suggested_fix: str,
                         step: str | None, run_id: str | None) -> str:
        from shared.db.session import transaction
        from shared.notes import AgentReport, leave_agent_note

        found = self.library().get(skill)
        report = AgentReport(
            skill=found.name, version=found.manifest.version, step=step or "-", error=error,
            diagnosis=diagnosis, suggested_fix=suggested_fix, inputs={}, pipeline="mcp",
            run_id=(run_id or "mcp")[:40], step_run_id=f"mcp#{uuid.uuid4().hex}",
            worker=None)
        with transaction(self.connection().endpoints.database_url) as session:
            note = leave_agent_note(session, report, secrets={})
        return f"filed improvement note {note} on {found.name} (`skillq notes {found.name}`)"


# The CLI's advice on giving an input (shared/inputs.py), and what an MCP client, which
# has no `skillq run` flags or command line, does instead: its run_skill's `inputs`.
_CLI_ADVICE = (("give it with --input {name}=VALUE", "give it in run_skill's inputs"),
               ("give it in the run's inputs", "give it in run_skill's inputs"),
               ("give its path on the command line", "give its path"))


def inputs_message(exc: InputError, skill: str) -> str:
    """Inputs that do not fit, as an MCP client reads them: each problem named by the
    argument it gave (``inputs.title``), its fix said in run_skill's terms. The checks
    are the CLI's own; only their wording is this server's."""
    lines = []
    for problem in exc.problems:
        name = problem.field.removeprefix(f"{skill}.")  # the input, without its skill
        message = problem.message
        for cli, here in _CLI_ADVICE:
            message = message.replace(cli.format(name=name), here)
        lines.append(f"inputs.{name}: {message}")
    return "\n".join(lines)


def _which(wait: str | int | None) -> str | None:
    # The inbox gives a wait's id as a number; a model passes it on as one.
    return None if wait is None else str(wait)


# The waits' errors name the CLI's flags (lifecycle/waits.py); a client has the tools'
# arguments instead.
_WAIT_ADVICE = (("`skillq inbox`", "the inbox tool"), ("--choice N", "choice N"),
                ("--choice", "choice"), ("(--reason TEXT)", "(reason)"),
                ("give it in the run's inputs", "give it in approve's inputs"))


def wait_message(exc: SkillqError) -> str:
    message = str(exc)
    for cli, here in _WAIT_ADVICE:
        message = message.replace(cli, here)
    return message


async def _call(fn: Any, *args: Any) -> Any:
    try:
        return await anyio.to_thread.run_sync(fn, *args)
    except SkillqError as exc:
        raise ToolError(str(exc)) from None


async def _decide(fn: Any, *args: Any) -> Any:
    try:
        return await anyio.to_thread.run_sync(fn, *args)
    except SkillqError as exc:
        raise ToolError(wait_message(exc)) from None


async def _run_skill(server: Server, ctx: Context, name: str, inputs: dict[str, Any] | None,
                     timeout_s: float) -> dict[str, Any] | InputRequiredResult:
    """Start the run (or, called again by a 2026-07-28 client with its replies, take up
    the one it asked about) and follow it to its end, asking its waits on the way."""
    try:
        if ctx.request_state is not None:
            held = waits.Following.resumed(ctx.request_state)
            await waits.settle_replies(ctx, server.connection(), held)
        else:
            run_id = await anyio.to_thread.run_sync(server.start, name, inputs)
            held = waits.Following(run_id, time.time() + timeout_s)
        try:
            ended = await waits.follow(ctx, server.connection(), held)
        except SkillqError as exc:  # still going after timeout_s: say where to look
            raise SkillqError(f"{exc}; `skillq wait {held.run_id}` follows it") from None
        if isinstance(ended, InputRequiredResult):
            return ended
        result: dict[str, Any] = await anyio.to_thread.run_sync(server.result, ended)
        return result
    except SkillqError as exc:
        raise ToolError(str(exc)) from None


def build(root: Path, ttl_s: float) -> MCPServer:
    """The MCP server for the vault at ``root``."""
    server = Server(root, ttl_s)
    mcp: MCPServer = MCPServer(
        "skillq", instructions=(
            "skillq's skill library. list_skills gives the catalog; load_skill a skill's "
            "instructions before you act on it; run_skill runs a skill on skillq's workers "
            "and returns its outputs; improvement_note reports a skill that failed (skills "
            "are never edited). A /name token in the conversation names a skill. A run "
            "may wait for a person: a question or an approval, asked as a form when this "
            "client shows forms; inbox lists what waits, and answer, approve and reject "
            "decide it."),
        request_state_security=RequestStateSecurity.ephemeral(ttl=STATE_TTL_S))

    @mcp.tool(description="The enabled skills of the vault, as {skills: [...]}: name, "
              "label, description, kind, inputs and outputs.")
    async def list_skills() -> dict[str, list[dict[str, Any]]]:
        # One object: a bare list would reach the client as one text block per skill.
        return {"skills": await _call(server.list_skills)}

    @mcp.tool(description="One skill's instructions, inputs and outputs, by name.")
    async def load_skill(name: str) -> str:
        result: str = await _call(server.load_skill, name)
        return result

    @mcp.tool(description="Run a skill through skillq's queues with the given inputs (an "
              "object keyed by the skill's input names); returns {run_id, state, outputs} "
              "or {run_id, state, error, step, item}. A question or approval the run "
              "opens is asked as a form when this client shows forms.")
    async def run_skill(ctx: Context, name: str, inputs: dict[str, Any] | None = None,
                        timeout_s: float = RUN_TIMEOUT_S
                        ) -> dict[str, Any] | InputRequiredResult:
        return await _run_skill(server, ctx, name, inputs, timeout_s)

    @mcp.tool(description="File an improvement note on a skill that failed: what went "
              "wrong, why, and the fix you suggest. The skill is not changed.")
    async def improvement_note(skill: str, error: str, diagnosis: str, suggested_fix: str,
                               step: str | None = None, run_id: str | None = None) -> str:
        result: str = await _call(server.improvement_note, skill, error, diagnosis,
                                  suggested_fix, step, run_id)
        return result

    @mcp.tool(description="The questions and approvals waiting for a person, oldest "
              "first, as {waits: [...]}: each with its id, kind (question or approval), "
              "run_id, step, what it asks, its choices, and an approval's inputs with their "
              "defaults. Give run_id for one run's (and the runs it started).")
    async def inbox(run_id: str | None = None) -> dict[str, list[dict[str, Any]]]:
        return {"waits": await _decide(server.inbox, run_id)}

    @mcp.tool(description="Answer a run's open question: text, or choice N (from 1) of "
              "its choices. wait: which question (its id, or its step id) when the run "
              "has several.")
    async def answer(ctx: Context, run_id: str, text: str | None = None,
                     choice: int | None = None, wait: str | int | None = None) -> dict[str, Any]:
        decided: dict[str, Any] = await _decide(server.answer, run_id, text, choice, wait,
                                                waits.decided_by(ctx))
        return decided

    @mcp.tool(description="Approve a run's open approval step. inputs: an object keyed by "
              "the approval's input names (the rest take their defaults); they become the "
              "step's outputs. wait: which approval (its id, or its step id) when the run "
              "has several.")
    async def approve(ctx: Context, run_id: str, inputs: dict[str, Any] | None = None,
                      wait: str | int | None = None) -> dict[str, Any]:
        decided: dict[str, Any] = await _decide(server.approve, run_id, inputs, wait,
                                                waits.decided_by(ctx))
        return decided

    @mcp.tool(description="Reject a run's open approval step, saying why: the run ends "
              "rejected (or goes on as the step's on_failure says). wait: which approval "
              "(its id, or its step id) when the run has several.")
    async def reject(ctx: Context, run_id: str, reason: str,
                     wait: str | int | None = None) -> dict[str, Any]:
        decided: dict[str, Any] = await _decide(server.reject, run_id, reason, wait,
                                                waits.decided_by(ctx))
        return decided

    # The prompts are the skills enabled when the server starts; each reads its skill
    # again when asked for, so an edited body is served as it is now.
    for skill in server.library().enabled():
        mcp.add_prompt(Prompt.from_function(
            _prompt_of(server, skill.name), name=skill.name,
            title=skill.manifest.display_label,
            description=" ".join(skill.manifest.description.split())))
    return mcp


def _prompt_of(server: Server, name: str) -> Any:
    async def prompt() -> str:
        text: str = await _call(server.load_skill, name)
        return text

    return prompt
