"""The generated vault: cached, `true` and python leaf skills, and a fan-out of each."""

from __future__ import annotations

from pathlib import Path

from shared.vault import Vault, load_vault

from .config import (
    PYTHON_ARGV,
)

# -- the generated vault ------------------------------------------------------------------

LEAF = """---
name: {name}
description: {description}
version: 1
approach: code
{inputs}run:
  command: "{command}"
  timeout: 30
  retries: 0
cache:
  enabled: {cache}
  ttl: 86400
---
# {name}

{description}
"""

FAN = """---
name: {name}
description: Fan {leaf} out over a list of integers, one step per item.
version: 1
inputs:
  - name: items
    type: integer[]
    required: true
steps:
  - id: each
    skill: {leaf}
    for_each: ${{inputs.items}}
{with_}---
# {name}

One step: `{leaf}` for each item of `items`.
"""

N_INPUT = """inputs:
  - name: n
    type: integer
    required: false
    default: 0
"""


def write_vault(root: Path) -> Vault:
    leaves = {
        # no inputs and cache on: after one run, every call is a cache hit
        "bench-cached": ("Does nothing, deterministically; cached, so a repeat is a cache hit.",
                         "true", "", "true"),
        "bench-true": ("Runs true, the cheapest script a step can spawn.", "true", N_INPUT,
                       "false"),
        "bench-python": ("Starts an isolated Python that does nothing.",
                         " ".join(PYTHON_ARGV), N_INPUT, "false"),
    }
    for name, (description, command, inputs, cache) in leaves.items():
        (root / name).mkdir(parents=True)
        (root / name / "SKILL.md").write_text(LEAF.format(
            name=name, description=description, command=command, inputs=inputs, cache=cache))
    fans = {"fan-cached": ("bench-cached", ""),
            "fan-true": ("bench-true", "    with:\n      n: ${item}\n"),
            "fan-python": ("bench-python", "    with:\n      n: ${item}\n")}
    for name, (leaf, with_) in fans.items():
        (root / name).mkdir(parents=True)
        (root / name / "SKILL.md").write_text(FAN.format(name=name, leaf=leaf, with_=with_))
    vault = load_vault(root)
    if vault.problems:
        raise SystemExit("the generated vault is invalid:\n"
                         + "\n".join(str(p) for p in vault.problems))
    return vault


def make_big_vault(root: Path, extra: int) -> Vault:
    """The bench skills plus ``extra`` realistic ones (benchmarks/validate_vault.py's)."""
    from validate_vault import generate

    root.mkdir(parents=True)
    generate(root, extra, seed=7)
    write_vault(root)
    vault = load_vault(root)
    if vault.problems:
        raise SystemExit(f"the big vault has {len(vault.problems)} problems, e.g. "
                         f"{vault.problems[0]}")
    return vault
