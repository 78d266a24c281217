"""Drawing one run's records as a tree: steps, items, attempts."""

from __future__ import annotations

from collections import defaultdict

from rich.tree import Tree

from orchestrator.history import RunTree
from shared.db.models import StepRun

_STYLE = {"succeeded": "green", "failed": "red", "skipped": "yellow", "running": "cyan",
          "pending": "dim", "retrying": "magenta", "lost": "magenta"}


def _attempt(row: StepRun) -> str:
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
        text += f"\n[red]{row.error}[/]"
    return text


def render_tree(tree: RunTree) -> Tree:
    run = tree.run
    style = _STYLE.get(run.state, "")
    head = f"[bold]{run.skill}[/] v{run.version} · [{style}]{run.state}[/] · {run.id}"
    if run.error:
        head += f"\n[red]{run.error}[/]"
    root = Tree(head)
    by_step: dict[str, list[StepRun]] = defaultdict(list)
    for row in tree.steps:
        by_step[row.step_id].append(row)
    for step_id, rows in by_step.items():
        branch = root.add(f"[cyan]{step_id}[/] → {rows[0].skill} (queue {rows[0].queue})")
        items: dict[int, list[StepRun]] = defaultdict(list)
        for row in rows:
            items[row.item_index].append(row)
        for index, attempts in sorted(items.items()):
            node = branch if index < 0 else branch.add(f"item {index}")
            for row in attempts:
                leaf = node.add(_attempt(row))
                child = tree.children.get(row.id)
                if child is not None:
                    leaf.add(render_tree(child))
    return root
