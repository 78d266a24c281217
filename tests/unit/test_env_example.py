"""deploy/skillq.env.example documents every SKILLQ_ setting (shared/settings.py)."""

from __future__ import annotations

import re
from pathlib import Path

from shared.settings import Settings

EXAMPLE = Path(__file__).parents[2] / "deploy" / "skillq.env.example"


def documented() -> set[str]:
    """Names set or shown commented out (``# SKILLQ_X=...``) in the example file."""
    pattern = re.compile(r"^#?\s*(SKILLQ_[A-Z0-9_]+)=", re.MULTILINE)
    return set(pattern.findall(EXAMPLE.read_text(encoding="utf-8")))


def test_every_setting_is_in_the_env_example() -> None:
    prefix = str(Settings.model_config.get("env_prefix", "")).upper()
    expected = {prefix + name.upper(): field for name, field in Settings.model_fields.items()}
    missing = sorted(set(expected) - documented())
    lines = "\n".join(f"# {expected[n].description}\n# {n}={expected[n].default}"
                      for n in missing)
    assert not missing, f"add these to {EXAMPLE}:\n{lines}"


def test_the_env_example_names_no_unknown_setting() -> None:
    known = {"SKILLQ_" + name.upper() for name in Settings.model_fields}
    unknown = sorted(documented() - known)
    assert not unknown, f"{EXAMPLE} sets what shared/settings.py does not read: {unknown}"
