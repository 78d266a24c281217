"""Skills skillq itself runs, shipped with the package rather than kept in a vault.

``skillq-ask`` is the agent behind `skillq ask`: an instruction skill with ``catalog:
all``, run on the `agent` queue like any agent step, so its turns, tokens and cost are
recorded as an agent step's are. ``skillq-approval`` is what an orchestrator's approval
step runs (workers/executors/approval.py); ``skillq-try`` is the test window's agent, an
ask whose library is the one skill tried (orchestrator/try_session.py). ``skillq-build``
is a skill build (workers/build/), which runs ``skillq-planner`` and one
``skillq-builder`` per new sub-skill as runs of their own. ``skillq-judge`` and
``skillq-check`` are `skillq eval`'s judge and script assertions; skillq-check is a code
skill, its script (check.py) shipped beside its SKILL.md. ``skillq-route`` and
``skillq-describe`` are `skillq eval NAME --triggers`'s router and its description writer
(orchestrator/evals/triggers.py). Their names are
reserved: a vault skill of that name is reported by validation and never shadows it.
"""

from __future__ import annotations

import functools
from pathlib import Path

from shared.manifest import APPROVAL_SKILL, BUILD_SKILL
from shared.skill import Skill, load_skill

ASK = "skillq-ask"
APPROVAL = APPROVAL_SKILL  # an orchestrator's approval step (shared/manifest.py)
TRY = "skillq-try"  # `skillq try NAME "request"`: the test window's agent
BUILD = BUILD_SKILL  # `skillq build "TASK"`: run by skillq itself (workers/build/)
PLANNER = "skillq-planner"  # a build's planner agent (its update_plan tool)
BUILDER = "skillq-builder"  # a build's sub-skill builder agent (its draft folder's tools)
JUDGE = "skillq-judge"  # `skillq eval`'s judge assertions: pass or fail, with evidence
CHECK = "skillq-check"  # `skillq eval`'s script assertions: a checker run in the sandbox
ROUTE = "skillq-route"  # `skillq eval --triggers`: which skill a request makes a model load
DESCRIBE = "skillq-describe"  # `skillq eval --triggers --improve`: descriptions to try
RESERVED = frozenset({ASK, APPROVAL, TRY, BUILD, PLANNER, BUILDER, JUDGE, CHECK, ROUTE,
                      DESCRIBE})
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
