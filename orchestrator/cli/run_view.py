"""Drawing one run's records as a tree: steps, items, attempts."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from rich.markup import escape
from rich.tree import Tree

from orchestrator.history import RunTree
from orchestrator.run_json import (
    Redactor,
    attempt_cost,
    attempt_turns,
    attempt_usage,
    turn_said,
    turns_by_item,
)
from shared.db.agent_models import AgentTurn
from shared.db.models import StepRun
from shared.db.wait_models import Wait

_STYLE = {"succeeded": "green", "failed": "red", "skipped": "yellow", "running": "cyan",
          "pending": "dim", "retrying": "magenta", "lost": "magenta", "waiting": "yellow",
          "cancelled": "yellow", "rejected": "red", "open": "yellow", "answered": "green",
          "approved": "green", "timed_out": "magenta"}


def _styled(state: str) -> str:
    style = _STYLE.get(state)
    return f"[{style}]{escape(state)}[/]" if style else escape(state)




OUTPUTS_CHARS = 300  # a glance at the values; --json has them whole
LOG_LINES = 20  # of each stored tail (the worker keeps the last 8 KiB)
TEXT_CHARS = 500  # of what a model turn said; --json --logs has it whole
ARGS_CHARS = 200  # of a tool call's arguments
NO_REDACTION = Redactor({}, frozenset())


def _outputs(value: Any, ref: str | None) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    if len(text) > OUTPUTS_CHARS:
        text = f"{text[:OUTPUTS_CHARS]}… ({len(text)} characters; --json shows them whole)"
    where = f" [dim](stored by reference {escape(ref)})[/]" if ref else ""
    return f"outputs: {escape(text)}{where}"


def _log(label: str, tail: str | None) -> str:
    lines = (tail or "").rstrip("\n").splitlines()
    if not lines:
        return ""
    shown = lines[-LOG_LINES:]
    head = f"{label} (last {len(shown)} lines)" if len(lines) > len(shown) else label
    body = "\n".join(f"  {escape(line)}" for line in shown)
    return f"\n[dim]{head}:[/]\n{body}"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else \
        f"{text[:limit]}… ({len(text)} characters; --json --logs shows them whole)"


def _usd(value: float) -> str:
    return f"${value:.4g}"


def _usage(row: StepRun, turns: list[AgentTurn]) -> str:
    """Tokens, cost and model turns of an agent attempt; "" for one that used no model."""
    tokens, cost = attempt_usage(row, turns), attempt_cost(row, turns)
    if not turns and not tokens["input"] and not tokens["output"] and not cost:
        return ""
    text = f"tokens {tokens['input']} in / {tokens['output']} out"
    if tokens["cache_read"] or tokens["cache_write"]:
        text += f" (cache read {tokens['cache_read']}, write {tokens['cache_write']})"
    replayed = sum(1 for t in turns if t.attempt < row.attempt)
    count = f"{len(turns)} model turn{'' if len(turns) == 1 else 's'}"
    return f"{text} · {_usd(cost)} · {count}" + (f" ({replayed} replayed)" if replayed else "")


def turn_text(turn: AgentTurn, redactor: Redactor) -> str:
    """One model request of the transcript: the model asked for and the one that
    answered, usage, time, stop reason, then what it said and the tools it called."""
    served = turn.model_served or "?"
    head = (f"[dim]turn {turn.turn}[/] · {escape(turn.model_requested)} → {escape(served)}"
            f" · {turn.tokens_in} in / {turn.tokens_out} out")
    if turn.cache_read or turn.cache_write:
        head += f" (cache read {turn.cache_read}, write {turn.cache_write})"
    head += f" · {_usd(turn.cost_usd)} · {turn.duration_ms:.0f} ms"
    head += f" · {escape(turn.stop_reason or 'no stop reason')}"
    text, calls = turn_said(turn, redactor)
    lines = [head]
    if text:
        lines += [f"  {escape(line)}" for line in _cut(text, TEXT_CHARS).splitlines()]
    for call in calls:
        args = json.dumps(call["arguments"], ensure_ascii=False, separators=(", ", ": "))
        lines.append(f"  [cyan]→ {escape(str(call['name']))}[/]({escape(_cut(args, ARGS_CHARS))})")
    return "\n".join(lines)


def _attempt(row: StepRun, redactor: Redactor = NO_REDACTION, logs: bool = False,
             turns: list[AgentTurn] | None = None) -> str:
    took = f"{row.duration_ms:.0f} ms" if row.duration_ms is not None else "-"
    parts = [_styled(row.state), f"attempt {row.attempt}", took]
    if row.worker:
        parts.append(f"on {row.worker}" + (f" (daemon {row.daemon})" if row.daemon else ""))
    if row.cache_hit:
        parts.append("cache hit")
    if row.lock_wait_ms is not None:  # a screen step: one at a time per machine
        parts.append(f"waited {row.lock_wait_ms:.0f} ms for the {row.queue} lock")
    usage = _usage(row, turns or [])
    if usage:
        parts.append(usage)
    text = " · ".join(parts)
    if row.route:
        text += f"\n[dim]routed to {row.queue}: {row.route}[/]"
    if row.error:
        text += f"\n[red]{escape(redactor.text(row.error) or '')}[/]"
    if logs:
        text += _log("stdout", redactor.text(row.stdout_tail))
        text += _log("stderr", redactor.text(row.stderr_tail))
    return text


def render_tree(tree: RunTree, outputs: Mapping[str, tuple[Any, str | None]] | None = None,
                redactor: Redactor = NO_REDACTION, logs: bool = False) -> Tree:
    """``outputs``: each run's (already redacted) outputs and store key, by run id;
    ``logs``: each attempt's stdout and stderr tails too, and the model turns it paid for
    (``tree`` loaded with ``run_tree(turns=True, responses=logs)``)."""
    run = tree.run
    head = f"[bold]{run.skill}[/] v{run.version} · {_styled(run.state)} · {run.id}"
    if run.error:
        head += f"\n[red]{escape(redactor.text(run.error) or '')}[/]"
    shown = (outputs or {}).get(run.id)
    if shown is not None and shown[0] is not None:
        head += "\n" + _outputs(*shown)
    root = Tree(head)
    turns = turns_by_item(tree)
    by_step: dict[str, list[StepRun]] = defaultdict(list)
    for row in tree.steps:
        by_step[row.step_id].append(row)
    for step_id, rows in by_step.items():
        branch = root.add(f"[cyan]{step_id}[/] → {rows[0].skill} v{rows[-1].version} "
                          f"(queue {rows[0].queue})")
        items: dict[int, list[StepRun]] = defaultdict(list)
        for row in rows:
            items[row.item_index].append(row)
        for index, attempts in sorted(items.items()):
            node = branch if index < 0 else branch.add(f"item {index}")
            for row in attempts:
                used = attempt_turns(turns, row)
                leaf = node.add(_attempt(row, redactor, logs, used))
                if logs:
                    _transcript(leaf, row, used, redactor)
                child = tree.children.get(row.id)
                if child is not None:
                    leaf.add(render_tree(child, outputs, redactor, logs))
            for wait in tree.waits_of(step_id, index):
                node.add(wait_text(wait, redactor))
    return root


def _transcript(leaf: Tree, row: StepRun, turns: list[AgentTurn], redactor: Redactor) -> None:
    """The turns this attempt paid for; those it replayed are under the attempt that
    paid for them."""
    earlier = sorted({t.attempt for t in turns if t.attempt < row.attempt})
    replayed = [t.turn for t in turns if t.attempt < row.attempt]
    if replayed:
        leaf.add(f"[dim]turn{'s' if len(replayed) > 1 else ''} "
                 f"{', '.join(map(str, replayed))} replayed from attempt"
                 f"{'s' if len(earlier) > 1 else ''} {', '.join(map(str, earlier))}[/]")
    for turn in turns:
        if turn.attempt == row.attempt:
            leaf.add(turn_text(turn, redactor))


def wait_text(wait: Wait, redactor: Redactor = NO_REDACTION) -> str:
    """A question or approval of a step: what it asks, and how it was decided (or who
    can decide it, while it is open)."""
    what = f"{wait.kind} #{wait.id}"
    text = f"[bold]{what}[/] {_styled(wait.state)} · {escape(redactor.text(wait.prompt) or '')}"
    if wait.choices:
        text += " [dim](" + escape(" | ".join(f"{i}. {c}" for i, c in
                                              enumerate(wait.choices, 1))) + ")[/]"
    for name, value in (wait.shown or {}).items():
        text += f"\n  [dim]{escape(name)}:[/] {escape(_cut(json.dumps(value), ARGS_CHARS))}"
    if wait.state == "open":
        how = f"skillq answer {wait.run_id} TEXT" if wait.kind == "question" else \
            f"skillq approve {wait.run_id} / skillq reject {wait.run_id} --reason TEXT"
        due = f", until {wait.deadline_at:%Y-%m-%d %H:%M:%S}" if wait.deadline_at else ""
        return text + f"\n  [dim]waiting since {wait.created_at:%H:%M:%S}{due}: {how}[/]"
    said = redactor.value(wait.answer)
    decided = f"{wait.decided_by or '?'}" + (
        f" at {wait.decided_at:%Y-%m-%d %H:%M:%S}" if wait.decided_at else "")
    if said not in (None, {}):
        text += f"\n  → {escape(_cut(json.dumps(said, ensure_ascii=False), ARGS_CHARS))}"
    if wait.reason:
        text += f"\n  [dim]reason:[/] {escape(redactor.text(wait.reason) or '')}"
    return text + f"\n  [dim]decided by {escape(decided)}[/]"
