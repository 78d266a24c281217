"""`skillq new`: scaffold a skill folder."""

from __future__ import annotations

from typing import Annotated

import typer

from orchestrator.cli.common import VaultOption, out, vault, vault_path
from orchestrator.scaffold import new_skill
from shared.errors import VaultError
from shared.problems import display_path
from shared.vault import forget_vaults, load_vault


def register(app: typer.Typer) -> None:
    app.command("new")(new)


def new(
    name: str,
    orchestrator: Annotated[bool, typer.Option(
        "--orchestrator", help="Scaffold an orchestrator whose steps call --step skills.")] = False,
    step: Annotated[list[str] | None, typer.Option(
        "--step", help="An existing skill the orchestrator calls (repeat for more).")] = None,
    vault_opt: VaultOption = None,
) -> None:
    """Create NAME with SKILL.md, plan.md, benchmarks.json, sub-skills.json and a script."""
    root = vault_path(vault_opt)
    calls = []
    if orchestrator:
        if not step:
            raise VaultError("an orchestrator needs at least one --step SKILL (an existing "
                             "skill it calls)")
        loaded = vault(vault_opt)
        calls = [loaded.get(s) for s in step]
    elif step:
        raise VaultError("--step only goes with --orchestrator")
    folder = new_skill(root, name, calls=calls)
    forget_vaults()
    problems = load_vault(root).problems_in(folder)
    out.print(f"created {display_path(folder)}/ (SKILL.md, plan.md, benchmarks.json, "
              "sub-skills.json" + (")" if orchestrator else ", main.py)"), markup=False)
    for problem in problems:
        out.print(str(problem), markup=False)
    out.print(f"next: edit {display_path(folder / 'SKILL.md')}, then `skillq validate "
              f"{display_path(folder)}`", markup=False)
