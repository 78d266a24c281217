"""Secrets a skill declares in `auth`, and only those, from the worker's environment.

A secret named ``youtube_api_key`` is read from ``SKILLQ_SECRET_YOUTUBE_API_KEY`` and
reaches the skill's process as ``YOUTUBE_API_KEY``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

PREFIX = "SKILLQ_SECRET_"


class MissingSecret(LookupError):
    def __init__(self, names: list[str]) -> None:
        wanted = ", ".join(f"{n} (set {PREFIX}{n.upper()})" for n in names)
        super().__init__(f"this worker lacks the secret(s) the skill declares: {wanted}")
        self.names = names


def secrets_for(auth: Iterable[str], environ: Mapping[str, str] | None = None
                ) -> dict[str, str]:
    env = os.environ if environ is None else environ
    names = list(auth)
    missing = [n for n in names if f"{PREFIX}{n.upper()}" not in env]
    if missing:
        raise MissingSecret(missing)
    return {n: env[f"{PREFIX}{n.upper()}"] for n in names}


def redact(text: str, secrets: Mapping[str, str]) -> str:
    """``text`` with every secret value replaced, before it is stored anywhere."""
    for value in secrets.values():
        if value:
            text = text.replace(value, "***")
    return text
