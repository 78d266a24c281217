"""Slash tokens: how a person invokes a skill in free text (seed 004, "Slash tokens").

A token is ``/`` and a slug (``[\\w-]+``) standing alone: after the start of the text or
whitespace, before whitespace or the end. So ``docs/meeting-notes`` and
``example.com/meeting-notes`` invoke nothing (the lookbehind), and neither does a
sentence-final ``/name.`` (the lookahead: a period would otherwise end the slug).

People also write a skill's display name (``/Daily Brief``): those tokens are matched
longest first through a display-name -> slug map, compared without regard to case, and
rewritten to ``/slug`` before the text is sent, because a model only ever sees slugs. A
display name two skills claim is dropped from the map: a token that stays plain text
beats sending the wrong skill's instructions.

``resolve`` is the one entry point the prompt, its token estimate and the dashboard's
composer share; what it resolves is used for one send and never stored.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

SLUG_TOKEN = re.compile(r"(?<!\S)/([\w-]+)(?!\S)")


class TokenState(StrEnum):
    ENABLED = "enabled"
    DISABLED = "disabled"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Entry:
    """A skill as tokens see it."""

    slug: str
    display: str
    enabled: bool
    instructions: str


@dataclass(frozen=True)
class Token:
    start: int  # the slash's offset in the text
    end: int
    slug: str  # the slug it names (for a display token, the one the map gave)
    written: str  # as the text has it, without the slash
    state: TokenState

    @property
    def display_shaped(self) -> bool:
        return self.written != self.slug

    def fix(self) -> str | None:
        """The command that makes a disabled or unknown token work."""
        if self.state is TokenState.DISABLED:
            return f"skillq enable {self.slug}"
        if self.state is TokenState.UNKNOWN:
            return f"skillq new {self.slug.lower()}"
        return None


@dataclass(frozen=True)
class Resolution:
    text: str  # display tokens rewritten to slugs: what is sent
    tokens: tuple[Token, ...]
    instructions: tuple[tuple[str, str], ...]  # (slug, body) of each enabled token, once

    def problems(self) -> list[str]:
        """One line per disabled or unknown token, with its fix."""
        lines, seen = [], set()
        for token in self.tokens:
            if token.state is TokenState.ENABLED or token.slug in seen:
                continue
            seen.add(token.slug)
            what = "is disabled" if token.state is TokenState.DISABLED else "is no skill"
            lines.append(f"/{token.written} {what}: `{token.fix()}`")
        return lines


def display_map(entries: Iterable[Entry]) -> dict[str, str]:
    """Display name (casefolded) -> slug, without names two skills claim, nor a name
    that is some skill's slug (a hand-typed slug means that skill)."""
    entries = list(entries)
    slugs = {entry.slug for entry in entries}
    claimed: dict[str, set[str]] = {}
    for entry in entries:
        name = " ".join(entry.display.split()).casefold()
        if name and name not in slugs:
            claimed.setdefault(name, set()).add(entry.slug)
    return {name: next(iter(slugs)) for name, slugs in claimed.items() if len(slugs) == 1}


def find_tokens(text: str, entries: Mapping[str, Entry]) -> list[Token]:
    """Every token of ``text`` in order: display tokens (longest first) and slug tokens."""
    names = sorted(display_map(entries.values()).items(), key=lambda kv: -len(kv[0]))
    folded = text.casefold()
    found: list[Token] = []
    position = 0
    while (slash := text.find("/", position)) != -1:
        position = slash + 1
        if slash > 0 and not text[slash - 1].isspace():
            continue
        token = _display_at(text, folded, slash, names, entries) or \
            _slug_at(text, slash, entries)
        if token is not None:
            found.append(token)
            position = token.end
    return found


def _state(slug: str, entries: Mapping[str, Entry]) -> TokenState:
    entry = entries.get(slug)
    if entry is None:
        return TokenState.UNKNOWN
    return TokenState.ENABLED if entry.enabled else TokenState.DISABLED


def _display_at(text: str, folded: str, slash: int, names: list[tuple[str, str]],
                entries: Mapping[str, Entry]) -> Token | None:
    # casefold() keeps lengths for the text a display name can match (letters, digits,
    # spaces); a text where it does not (e.g. "ß") simply matches no display name there.
    if len(folded) != len(text):
        return None
    for name, slug in names:
        end = slash + 1 + len(name)
        if folded.startswith(name, slash + 1) and (end == len(text) or text[end].isspace()):
            return Token(slash, end, slug, text[slash + 1:end], _state(slug, entries))
    return None


def _slug_at(text: str, slash: int, entries: Mapping[str, Entry]) -> Token | None:
    match = SLUG_TOKEN.match(text, slash)
    if match is None:
        return None
    written = match.group(1)
    # Slugs are lowercase: `/Daily` written at the start of a sentence means `daily`.
    slug = written if written in entries or written.lower() not in entries else written.lower()
    return Token(slash, match.end(), slug, written, _state(slug, entries))


def resolve(text: str, entries: Mapping[str, Entry]) -> Resolution:
    """The tokens of ``text``, the text as sent, and the instructions to send with it."""
    tokens = find_tokens(text, entries)
    parts, last = [], 0
    for token in tokens:
        parts += [text[last:token.start], "/" + token.slug]
        last = token.end
    parts.append(text[last:])
    bodies: dict[str, str] = {}
    for token in tokens:
        if token.state is TokenState.ENABLED and token.slug not in bodies:
            bodies[token.slug] = entries[token.slug].instructions
    return Resolution("".join(parts), tuple(tokens), tuple(bodies.items()))

