"""Which executor runs a skill's steps: the first of EXECUTORS that handles its manifest.
Used by the run path (step_runner.execute) and the cache path (claim.py) alike."""

from __future__ import annotations

from shared.manifest import Manifest
from workers.build.controller import BuildExecutor
from workers.executors.agent import AgentExecutor
from workers.executors.approval import ApprovalExecutor
from workers.executors.base import StepExecutor
from workers.executors.nested import NestedRunExecutor
from workers.executors.screen import ScreenExecutor
from workers.executors.script import ScriptExecutor

EXECUTORS: tuple[StepExecutor, ...] = (
    ApprovalExecutor(),  # before AgentExecutor: its built-in skill is instructions
    BuildExecutor(),  # so is this one
    NestedRunExecutor(),
    AgentExecutor(),
    ScreenExecutor(),
    ScriptExecutor(),
)


def executor_for(manifest: Manifest) -> StepExecutor:
    for executor in EXECUTORS:
        if executor.handles(manifest):
            return executor
    raise LookupError(f"no executor runs a skill like {manifest.name}")  # validation forbids
