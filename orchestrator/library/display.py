"""How a skill is named to people: its label, else its slug title-cased."""

from __future__ import annotations

from dataclasses import dataclass

from shared.errors import LibraryError

MAX_LABEL_CHARS = 120


@dataclass(frozen=True)
class SkillState:
    """What the library says about one live skill (the defaults when it has no row)."""

    enabled: bool = True
    label: str | None = None
    pinned_order: int | None = None  # 0 first


def title_case(slug: str) -> str:
    """`daily-brief` -> `Daily Brief`."""
    return slug.replace("-", " ").title()


def display_label(slug: str, library_label: str | None, manifest_label: str | None) -> str:
    """The label set with `skillq label` wins over SKILL.md's `label`, then the slug.

    A library label is the user's own name for the skill on this vault; it never edits
    SKILL.md (that would change a published or default skill's content hash).
    """
    return library_label or manifest_label or title_case(slug)


def checked_label(text: str) -> str:
    label = " ".join(text.split())
    if not label:
        raise LibraryError("a label needs some text; to go back to the default label use "
                           "`skillq label NAME --clear`")
    if len(label) > MAX_LABEL_CHARS:
        raise LibraryError(f"a label is at most {MAX_LABEL_CHARS} characters (this one has "
                           f"{len(label)}); shorten it")
    return label
