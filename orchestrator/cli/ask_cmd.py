"""`skillq ask`: one request to an agent over the library, its answer streamed to stdout
(orchestrator/ask.py). What it cost goes to stderr and into the run's record."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from orchestrator.cli import common
from orchestrator.cli.common import VaultOption, vault

if TYPE_CHECKING:
    from collections.abc import Sequence

    from shared.agent_prompt.ask import AskPrompt
    from shared.vault import Vault


def register(app: typer.Typer) -> None:
    app.command("ask")(ask)


def ask(
    text: Annotated[str, typer.Argument(help="The request; `/slug` or `/Display Name` "
                                        "invokes that skill.")],
    model: Annotated[str | None, typer.Option(
        "--model", help="provider:model for this request (default: SKILLQ_AGENT_MODEL).")
                     ] = None,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Print the prompt that would be sent and its token estimate; "
        "send nothing.")] = False,
    as_json: Annotated[bool, typer.Option(
        "--json", help='Print one JSON object at the end: {"run_id", "state", "answer", '
        '"tokens_in", "tokens_out", "cost_usd"} (nothing streamed).')] = False,
    vault_opt: VaultOption = None,
) -> None:
    """One agent turn over the library: its enabled skills, the skill, execute_skill and
    skill_improvement_note tools; the answer streams to stdout. Ctrl-C cancels it."""
    from orchestrator.ask import checked_text

    checked_text(text)
    loaded = vault(vault_opt)
    if dry_run:
        _dry_run(loaded, text)
        return
    _ask(loaded, text, model, as_json)


def _dry_run(loaded: Vault, text: str) -> None:
    from orchestrator.ask import preview
    from orchestrator.library.reach import library_view
    from shared.agent_prompt.ask import invoked_mcp_servers
    from shared.library_tokens import LibraryState
    from shared.settings import get_settings

    view = library_view(loaded.root)
    if view.missing:
        common.err.print(f"note: {view.missing}", markup=False)
    states = {n: LibraryState(s.enabled, s.label) for n, s in view.states.items()}
    shown = preview(get_settings(), loaded, text, states)
    _problems(shown)
    print(_rendered(shown, invoked_mcp_servers(shown.resolution, loaded.skills)))
    sys.stdout.flush()


def _rendered(shown: AskPrompt, mcp_servers: Sequence[str] = ()) -> str:
    from shared.agent_prompt.ask import estimate_tokens

    p = shown.prompt
    tools = ", ".join(t.name for t in shown.tools) or "none"
    if mcp_servers:  # what they offer is theirs to list, on the worker that answers
        tools += (f"; and the tools of MCP server(s) {', '.join(mcp_servers)}, which the "
                  "invoked skills require (not counted below)")
    lines = [f"--- system ({len(p.system)} characters, ~{estimate_tokens(p.system)} tokens) "
             "---", p.system, "",
             f"--- user (~{estimate_tokens(p.user)} tokens) ---", p.user, "",
             f"--- tools: {tools}", *(f"warning: {w}" for w in p.warnings),
             f"~{shown.estimate_tokens} input tokens for the first request (about 4 "
             "characters a token; the model's tokenizer decides); nothing was sent"]
    return "\n".join(lines)


def _problems(shown: AskPrompt) -> None:
    for line in shown.resolution.problems():
        common.err.print(f"note: {line}", markup=False)


def _ask(loaded: Vault, text: str, model: str | None, as_json: bool) -> None:
    from orchestrator.ask import AnswerStream, start_ask, usage_of
    from orchestrator.cli.answer_follow import follow_answer
    from orchestrator.connect import connect
    from shared.errors import PipelineFailed

    conn = connect()

    def write(piece: str) -> None:
        sys.stdout.write(piece)
        sys.stdout.flush()

    stream = AnswerStream(conn.endpoints.database_url, (lambda _: None) if as_json else write)
    try:
        asked = start_ask(conn, loaded, text, model=model, workdir=str(Path.cwd()))
    except BaseException:
        stream.finish(None)
        raise
    for line in asked.resolution.problems():
        common.err.print(f"note: {line}", markup=False)
    done = follow_answer(conn, asked.run_id, stream)
    final, answer, rest = done.final, done.answer, done.rest
    result: dict[str, Any] = final.result
    usage = usage_of(conn, asked.run_id)
    if as_json:
        print(json.dumps({"run_id": asked.run_id, "state": final.state, "answer": answer,
                          **({"error": result["error"]} if result.get("error") else {}),
                          "tokens_in": usage.tokens_in, "tokens_out": usage.tokens_out,
                          "cost_usd": usage.cost_usd}, ensure_ascii=False))
    else:
        write(rest)
        if stream.printed or rest:
            write("\n")
    common.err.print(f"run {asked.run_id}: {usage.tokens_in} tokens in, {usage.tokens_out} "
                     f"out, ${usage.cost_usd:.4f}", markup=False)
    if not final.succeeded:
        raise PipelineFailed(final.failure)
