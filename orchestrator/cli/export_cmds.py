"""`skillq export` (between on-disk forms, or a vault archive with its history) and
`skillq sync` (sub-skills.json from steps)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from orchestrator.cli.common import VaultOption, out, vault
from orchestrator.forms import client_fields, derived_sub_skills, write_skill, write_sub_skills
from shared.errors import ValidationFailed, VaultError
from shared.problems import display_path
from shared.vault import forget_vaults


def register(app: typer.Typer) -> None:
    app.command("export")(export)
    app.command("sync")(sync)


def export(
    name: Annotated[str | None, typer.Argument(
        help="Skill to export (default: every skill in the vault).", show_default=False)] = None,
    agentskills: Annotated[Path | None, typer.Option(
        "--agentskills", metavar="OUT", help="Write the Agent Skills form into OUT: SKILL.md "
        "with the spec fields (passes `agentskills validate`) plus skill.yaml; Claude "
        "Code's fields stay in SKILL.md as written.")] = None,
    bot0: Annotated[Path | None, typer.Option(
        "--bot0", metavar="OUT", help="Write the bot0 form into OUT: every field in "
        "SKILL.md's frontmatter.")] = None,
    archive: Annotated[Path | None, typer.Option(
        "--archive", metavar="FILE", help="Write FILE.tar.gz: the whole vault with its "
        "history (runs, steps, artifacts, cache, library state); `skillq import` restores "
        "it.")] = None,
    vault_opt: VaultOption = None,
) -> None:
    """Write skills into OUT in another on-disk form, or the vault and its history into an
    archive; the vault itself is left as it is."""
    if sum(x is not None for x in (agentskills, bot0, archive)) != 1:
        raise VaultError("give exactly one of --agentskills OUT, --bot0 OUT or --archive FILE")
    if archive is not None:
        if name:
            raise VaultError("--archive takes the whole vault; leave out the skill name")
        from orchestrator.cli.archive_cmds import export_to_archive  # SQLAlchemy

        export_to_archive(archive, vault_opt)
        return
    form, out_dir = ("agentskills", agentskills) if agentskills is not None else ("bot0", bot0)
    assert out_dir is not None
    loaded = vault(vault_opt)
    skills = [loaded.get(name)] if name else [loaded.skills[n] for n in sorted(loaded.skills)]
    bad = [p for s in skills for p in loaded.problems_in(s.folder)]
    if bad:
        raise ValidationFailed(bad)
    if not skills:
        raise VaultError(f"no skills to export in {display_path(loaded.root)}")
    taken = [display_path(out_dir / s.name) for s in skills if (out_dir / s.name).exists()]
    if taken:  # checked before anything is written, so a failed export leaves OUT as it was
        raise VaultError(f"already exists: {', '.join(taken)}; choose an empty OUT folder")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise VaultError(f"cannot create {display_path(out_dir)}: {exc.strerror or exc}") from None
    for skill in skills:
        target = write_skill(skill, out_dir, form)
        out.print(f"{skill.name} -> {display_path(target)} ({form} form)", markup=False)
        client = client_fields(skill.manifest)
        if client and form == "agentskills":
            out.print(f"  kept in SKILL.md as written: {', '.join(client)} (fields outside "
                      "the specification, which `agentskills validate` refuses)", markup=False)


def sync(name: str, vault_opt: VaultOption = None) -> None:
    """Regenerate an orchestrator's sub-skills.json from its steps (roles are kept)."""
    loaded = vault(vault_opt)
    skill = loaded.get(name)
    if not skill.manifest.steps:
        raise VaultError(f"{name} has no steps; its sub-skills.json is written by hand")
    path = write_sub_skills(skill, derived_sub_skills(skill, dict(loaded.skills)))
    forget_vaults()
    out.print(f"wrote {display_path(path)}", markup=False)
