"""Drawing one run's records as a tree: steps, items, attempts."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from rich.markup import escape
from rich.tree import Tree

from orchestrator.history import RunTree
from orchestrator.run_json import Redactor
from shared.db.models import StepRun

_STYLE = {"succeeded": "green", "failed": "red", "skipped": "yellow", "running": "cyan",
          "pending": "dim", "retrying": "magenta", "lost": "magenta"}


OUTPUTS_CHARS = 300  # a glance at the values; --json has them whole
LOG_LINES = 20  # of each stored tail (the worker keeps the last 8 KiB)
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


def _attempt(row: StepRun, redactor: Redactor = NO_REDACTION, logs: bool = False) -> str:
    style = _STYLE.get(row.state, "")
    took = f"{row.duration_ms:.0f} ms" if row.duration_ms is not None else "-"
    parts = [f"[{style}]{row.state}[/]", f"attempt {row.attempt}", took]
    if row.worker:
        parts.append(f"on {row.worker}" + (f" (daemon {row.daemon})" if row.daemon else ""))
    if row.cache_hit:
        parts.append("cache hit")
    if row.lock_wait_ms is not None:  # a screen step: one at a time per machine
        parts.append(f"waited {row.lock_wait_ms:.0f} ms for the {row.queue} lock")
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
    ``logs``: each attempt's stdout and stderr tails too."""
    run = tree.run
    style = _STYLE.get(run.state, "")
    head = f"[bold]{run.skill}[/] v{run.version} · [{style}]{run.state}[/] · {run.id}"
    if run.error:
        head += f"\n[red]{escape(redactor.text(run.error) or '')}[/]"
    shown = (outputs or {}).get(run.id)
    if shown is not None and shown[0] is not None:
        head += "\n" + _outputs(*shown)
    root = Tree(head)
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
                leaf = node.add(_attempt(row, redactor, logs))
                child = tree.children.get(row.id)
                if child is not None:
                    leaf.add(render_tree(child, outputs, redactor, logs))
    return root
