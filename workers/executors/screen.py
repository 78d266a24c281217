"""A dom0 (browser) or cmd0 (desktop) step: one at a time per machine, under the
machine's lock for its class (screen_run.py)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lifecycle.context import WorkerContext
from shared.manifest import Manifest
from shared.skill import Skill
from workers import sandbox as sandboxes
from workers.attempt_end import STEP_MARKER, scratch_for
from workers.executors.process import ProcessExecutor
from workers.executors.screen_run import is_screen_step, run_screen_step
from workers.script_executor import ScriptResult
from workers.step_types import Claim, ScreenLock


class ScreenExecutor(ProcessExecutor):
    kind = "screen"

    def handles(self, manifest: Manifest) -> bool:
        return is_screen_step(manifest)

    def launch(self, ctx: WorkerContext, job: Claim, skill: Skill, inputs: dict[str, Any],
               secrets: Mapping[str, str], workdir: Path | None
               ) -> tuple[ScriptResult, ScreenLock | None]:
        ran = run_screen_step(skill.folder, skill.manifest, inputs, settings=ctx.settings,
                              database_url=ctx.database_url, secrets=secrets,
                              workdir=workdir, extra_env={STEP_MARKER: job.row_id},
                              scratch=scratch_for(job.row_id),
                              sandbox=sandboxes.current(ctx.settings))
        return ran.done, ScreenLock(ran.lock_wait_ms, ran.locked_at, ran.unlocked_at)
