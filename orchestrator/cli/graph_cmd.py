"""`skillq graph`: the sub-skill DAG (or an orchestrator's step graph)."""

from __future__ import annotations

import enum
from typing import Annotated

import typer

from orchestrator import drawing
from orchestrator.cli.common import VaultOption, out, vault


class GraphFormat(enum.StrEnum):
    tree = "tree"
    mermaid = "mermaid"
    dot = "dot"


def register(app: typer.Typer) -> None:
    app.command("graph")(graph)


def graph(
    name: str,
    fmt: Annotated[GraphFormat, typer.Option("--format", help="tree, mermaid or dot.")
                   ] = GraphFormat.tree,
    steps: Annotated[bool, typer.Option("--steps", help="Draw the orchestrator's step "
                     "graph (what waits for what) instead of the sub-skill DAG.")] = False,
    vault_opt: VaultOption = None,
) -> None:
    """Draw what a skill is made of."""
    loaded = vault(vault_opt)
    skill = loaded.get(name)
    if steps:
        if not skill.manifest.steps:
            out.print(f"{skill.name} has no steps (it is not an orchestrator)", markup=False)
            raise typer.Exit(1)
        drawn = {GraphFormat.tree: drawing.steps_tree, GraphFormat.mermaid: drawing.steps_mermaid,
                 GraphFormat.dot: drawing.steps_dot}[fmt](skill)
    elif fmt is GraphFormat.tree:
        drawn = drawing.tree(loaded, skill.name)
    else:
        render = drawing.mermaid if fmt is GraphFormat.mermaid else drawing.dot
        drawn = render(loaded, skill.name)
    if isinstance(drawn, str):
        out.print(drawn, markup=False)
    else:
        out.print(drawn)
