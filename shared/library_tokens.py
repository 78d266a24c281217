"""The library as slash tokens see it (shared/slash_tokens.py): each skill of a vault with
whether it is enabled and the name people see, read the same way by the client (`skillq
ask`, its `--dry-run`, the dashboard's composer) and by the worker that sends the prompt.

The name people see is the library's label (`skillq label`), else SKILL.md's ``label``,
else the slug title-cased: orchestrator/library/display.py's rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from shared.db.library_models import LibrarySkill
from shared.skill import Skill
from shared.slash_tokens import Entry


@dataclass(frozen=True, slots=True)
class LibraryState:
    enabled: bool = True
    label: str | None = None


def library_states(session: Session, vault: str) -> dict[str, LibraryState]:
    """The live library rows of ``vault`` (the resolved root, as runs record it)."""
    rows = session.execute(select(LibrarySkill.name, LibrarySkill.enabled, LibrarySkill.label)
                           .where(LibrarySkill.vault == vault, LibrarySkill.name.is_not(None)))
    return {name: LibraryState(bool(enabled), label) for name, enabled, label in rows if name}


def token_entries(skills: Mapping[str, Skill], states: Mapping[str, LibraryState]
                  ) -> dict[str, Entry]:
    found = {}
    for name, skill in skills.items():
        state = states.get(name, LibraryState())
        found[name] = Entry(name, state.label or skill.manifest.display_label, state.enabled,
                            skill.body)
    return found
