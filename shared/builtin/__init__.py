"""Skills skillq itself runs, shipped with the package rather than kept in a vault.

``skillq-ask`` is the agent behind `skillq ask`: an instruction skill with ``catalog:
all``, run on the `agent` queue like any agent step, so its turns, tokens and cost are
recorded as an agent step's are. Its name is reserved: a vault skill of that name is
reported by validation and never shadows it.
"""

from __future__ import annotations

import functools
from pathlib import Path

from shared.skill import Skill, load_skill

ASK = "skillq-ask"
RESERVED = frozenset({ASK})
_ROOT = Path(__file__).resolve().parent


@functools.cache
def builtin_skill(name: str) -> Skill | None:
    """The shipped skill ``name``, or None when skillq ships none of that name."""
    if name not in RESERVED:
        return None
    skill, problems = load_skill(_ROOT / name)
    if skill is None or problems:  # a packaging fault, never a user's: fail loudly
        raise RuntimeError(f"built-in skill {name} does not load: {problems}")
    return skill
