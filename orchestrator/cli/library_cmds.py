"""`skillq enable|disable|delete|label|pin|unpin|defaults`: the skill library.

State lives in PostgreSQL (orchestrator/library/); these commands reach the database as
`skillq runs` does, starting the embedded one when no URL is configured.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated

import typer

from orchestrator.cli.common import VaultOption, err, out, vault, vault_path
from orchestrator.library.dependents import Reference, grouped
from orchestrator.library.display import checked_label, display_label
from shared.errors import LibraryError
from shared.problems import display_path

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

Force = Annotated[bool, typer.Option("--force", help="Go ahead although other skills refer "
                                     "to it (they are named).")]


def register(app: typer.Typer) -> None:
    for name, command in (("enable", enable), ("disable", disable), ("delete", delete),
                          ("label", label), ("pin", pin), ("unpin", unpin),
                          ("defaults", defaults)):
        app.command(name)(command)


def _database() -> str:
    from orchestrator.connect import connect

    return connect(workers=False).endpoints.database_url


@contextmanager
def _session() -> Iterator[Session]:
    from shared.db.session import transaction

    with transaction(_database()) as session:
        yield session


def _warn_referrers(refs: tuple[Reference, ...], what: str) -> None:
    if refs:
        err.print(f"warning: {what}: " + "; ".join(grouped(list(refs))), style="yellow",
                  markup=False)


def enable(names: Annotated[list[str], typer.Argument(help="Skill(s) to enable.")],
           vault_opt: VaultOption = None) -> None:
    """Let a disabled skill run again."""
    from orchestrator.library import repo

    loaded = vault(vault_opt)
    skills = [loaded.get(n) for n in names]
    with _session() as session:
        for skill in skills:
            changed = repo.set_enabled(session, repo.vault_key(loaded.root), skill.name, True)
            out.print(f"{skill.name}: {'enabled' if changed else 'already enabled'}",
                      markup=False)


def disable(name: str, force: Force = False, vault_opt: VaultOption = None) -> None:
    """Stop a skill from running (`skillq run`, and any orchestrator that calls it, are
    refused before anything is recorded). Refused while other skills refer to it, unless
    --force."""
    from orchestrator.library import repo
    from orchestrator.library.delete import check_dependents

    loaded = vault(vault_opt)
    skill = loaded.get(name)
    refs = check_dependents(loaded, skill.name, "disable", force=force)
    with _session() as session:
        changed = repo.set_enabled(session, repo.vault_key(loaded.root), skill.name, False)
    out.print(f"{skill.name}: {'disabled' if changed else 'already disabled'}", markup=False)
    _warn_referrers(refs, "these skills will be refused while it is disabled")


def delete(name: str, force: Force = False, vault_opt: VaultOption = None) -> None:
    """Soft-delete a skill: its folder moves to <vault>/.deleted/, its run history stays,
    and its name is free for a new skill. Refused while other skills refer to it, unless
    --force."""
    from orchestrator.library.delete import check_dependents, delete_skill

    loaded = vault(vault_opt)
    skill = loaded.get(name)
    check_dependents(loaded, skill.name, "delete", force=force)  # before reaching the db
    deleted = delete_skill(_database(), loaded, skill.name, force=force)
    out.print(f"deleted {deleted.name}: folder moved to {display_path(deleted.archived)}; "
              "its runs are kept", markup=False)
    _warn_referrers(deleted.referrers, "these skills now refer to a deleted skill")


def label(
    name: str,
    text: Annotated[str | None, typer.Argument(help="The display label.",
                                               show_default=False)] = None,
    clear: Annotated[bool, typer.Option("--clear", help="Remove the label set here (SKILL.md's "
                                        "label, else the title-cased name, shows again).")
                     ] = False,
    vault_opt: VaultOption = None,
) -> None:
    """Set the name people see for a skill (SKILL.md is not changed)."""
    from orchestrator.library import repo

    if (text is None) == (not clear):
        raise LibraryError("give the label TEXT, or --clear to remove it")
    loaded = vault(vault_opt)
    skill = loaded.get(name)
    value = None if clear else checked_label(text or "")
    with _session() as session:
        repo.set_label(session, repo.vault_key(loaded.root), skill.name, value)
    shown = display_label(skill.name, value, skill.manifest.label)
    out.print(f"{skill.name}: label '{shown}'", markup=False)


def pin(
    name: str,
    position: Annotated[int | None, typer.Option(
        "--position", min=1, help="1 = first (default: after the pinned ones).",
        show_default=False)] = None,
    vault_opt: VaultOption = None,
) -> None:
    """Pin a skill: pinned skills come first in `skillq list` and `catalog` (at most 10).
    Pinning a pinned skill again moves it."""
    from orchestrator.library import repo
    from shared.db.library_models import MAX_PINS

    if position is not None and position > MAX_PINS:
        raise LibraryError(f"--position {position}: at most {MAX_PINS} skills can be "
                           f"pinned; give 1 to {MAX_PINS}")
    loaded = vault(vault_opt)
    skill = loaded.get(name)
    with _session() as session:
        order = repo.pin(session, repo.vault_key(loaded.root), skill.name,
                         None if position is None else position - 1)
    out.print("pinned: " + ", ".join(f"{i}. {n}" for i, n in enumerate(order, 1)),
              markup=False)


def unpin(name: str, vault_opt: VaultOption = None) -> None:
    """Unpin a skill (the other pins close up)."""
    from orchestrator.library import repo

    loaded = vault(vault_opt)
    skill = loaded.get(name)
    with _session() as session:
        was = repo.unpin(session, repo.vault_key(loaded.root), skill.name)
    out.print(f"{skill.name}: {'unpinned' if was else 'was not pinned'}", markup=False)


def defaults(
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Report what would change; "
                                          "write nothing.")] = False,
    vault_opt: VaultOption = None,
) -> None:
    """Install or update skillq's built-in skills in the vault; skills you edited or
    deleted are left alone."""
    from orchestrator.library.defaults import Outcome, reconcile

    root = vault_path(vault_opt)
    with _session() as session:
        decisions = reconcile(session, root, dry_run=dry_run)
    counts = {o: sum(d.outcome is o for d in decisions) for o in Outcome}
    for d in decisions:
        verb = f"would be {d.outcome}" if dry_run and d.outcome in (
            Outcome.INSTALLED, Outcome.UPDATED) else str(d.outcome)
        out.print(f"{d.name}: {verb} ({d.reason})", markup=False)
    out.print(", ".join(f"{n} {o}" for o, n in counts.items()) + f" in "
              f"{display_path(root)}", markup=False)
