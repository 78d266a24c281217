"""The interface every kind of step runs behind, and what they share: the secrets a
skill declares, read at the step."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from lifecycle.context import WorkerContext
from shared.manifest import Manifest
from shared.secrets import MissingSecret, secrets_for
from shared.skill import Skill
from shared.states import StepState
from workers.step_types import Claim, Result


class StepExecutor(Protocol):
    """Runs the claimed attempts of one kind of step."""

    kind: str

    def handles(self, manifest: Manifest) -> bool:
        """Whether a skill of this manifest is this kind (the registry asks in order)."""
        ...

    def run(self, ctx: WorkerContext, job: Claim, skill: Skill) -> Result:
        """Run the attempt to its result: never an exception for the step's own faults."""
        ...

    def answer_from_cache(self, ctx: WorkerContext, job: Claim, skill: Skill
                          ) -> Result | None:
        """The result ``job.cached`` gives without running anything, or None when the
        attempt has to run (or this kind is never cached)."""
        ...


def declared_secrets(skill: Skill) -> Mapping[str, str] | Result:
    """The secrets the skill declares (its ``auth``), or the failure naming the one this
    worker lacks."""
    try:
        return secrets_for(skill.manifest.auth)
    except MissingSecret as exc:
        return Result(StepState.FAILED, error=str(exc), error_kind="missing_secret")
