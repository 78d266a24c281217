"""``${secrets.NAME}`` in browser and desktop actions: where one may stand, how the
worker keeps its value out of every file, and how the host process fills it in.

A skill declares the secrets it uses under ``auth``; a ``goto`` url, a ``fill`` value or
a ``type`` text may then hold ``${secrets.NAME}``. The worker resolves the field's
``${inputs.NAME}`` references as usual but leaves each secret as a marker, names only::

    {"$secrets": ["https://example.org/?key=", {"secret": "api_key"}]}

so the action file the host process reads from disk never holds a value. The host
reads the values from its own environment (the script executor hands every declared
secret to a step's process that way, workers/script_executor.py) and joins the parts
just before the action runs. Literal parts are never parsed again: an input whose value
reads ``${secrets.x}`` stays that text, it cannot pull a secret in.

Only those three fields: a selector, an image or a key is shown in errors, progress
notes and logs as the manifest spells it, and must stay showable.

Pure ``re``: the host process (``python -I -m workers.dom0.host``) imports this.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MARK = "$secrets"
# (action kind, field) where a secret may stand: what is typed or visited, never shown.
SECRET_FIELDS = frozenset({("goto", "url"), ("fill", "value"), ("type", "text")})
WHERE = "a goto url, a fill value or a type text"

_TOKEN = re.compile(r"\$\$\{|\$\{([^{}]*)\}")  # as shared/refs.py: $${ is a literal ${
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")  # as a manifest's auth names


class SecretRefError(ValueError):
    """A ``${secrets...}`` that is not ``${secrets.NAME}``, or a secret the host lacks."""


@dataclass(frozen=True, slots=True)
class SecretRef:
    name: str

    def __str__(self) -> str:
        return f"${{secrets.{self.name}}}"


Part = str | SecretRef


def split_secrets(text: str) -> list[Part]:
    """``text`` cut at its ``${secrets.NAME}`` references. The text between is left as
    written (its ``${inputs...}`` and ``$${`` are the reference resolver's to read)."""
    parts: list[Part] = []
    pos = 0
    for match in _TOKEN.finditer(text):
        expr = match.group(1)
        if expr is None or expr.strip().split(".")[0] != "secrets":
            continue  # a $${ escape or another kind of reference: not ours
        ref = _parse(expr, match.group(0))
        if match.start() > pos:
            parts.append(text[pos:match.start()])
        parts.append(ref)
        pos = match.end()
    if pos < len(text) or not parts:
        parts.append(text[pos:])
    return parts


def _parse(expr: str, written: str) -> SecretRef:
    names = expr.strip().split(".")[1:]
    if len(names) != 1 or not _NAME.match(names[0]):
        raise SecretRefError(f"'{written}' is not a secret reference; write "
                             "${secrets.NAME}, NAME one of the skill's auth names")
    return SecretRef(names[0])


def secret_refs(text: str) -> list[SecretRef]:
    return [p for p in split_secrets(text) if isinstance(p, SecretRef)]


def marked(parts: list[Part]) -> dict[str, list[Any]]:
    """The action-file form of a field holding secrets: literal text and names only."""
    return {MARK: [p if isinstance(p, str) else {"secret": p.name} for p in parts]}


def is_marked(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {MARK}


def spelled(value: Any) -> Any:
    """A field as errors and progress notes may show it: each secret as the manifest
    spells it, ``${secrets.NAME}``; any other value as it is."""
    if not is_marked(value):
        return value
    return "".join(p if isinstance(p, str) else str(SecretRef(p["secret"]))
                   for p in value[MARK])


def names_in(action: Mapping[str, Any]) -> list[str]:
    """The secrets an action-file action uses, by name."""
    return [p["secret"] for v in action.values() if is_marked(v)
            for p in v[MARK] if not isinstance(p, str)]


def filled(action: Mapping[str, Any], secrets: Mapping[str, str]) -> dict[str, Any]:
    """``action`` with each marked field joined with the secrets' values: for the moment
    the action runs, never to be stored. SecretRefError naming a secret not there."""
    out = dict(action)
    for key, value in action.items():
        if is_marked(value):
            text = []
            for part in value[MARK]:
                if isinstance(part, str):
                    text.append(part)
                elif part["secret"] in secrets:
                    text.append(secrets[part["secret"]])
                else:
                    raise SecretRefError(f"secret '{part['secret']}' did not reach the "
                                         "step's process; is it declared under auth?")
            out[key] = "".join(text)
    return out
