"""A ``run:`` step: the skill's command, sandboxed, under its timeout and limits
(workers/script_executor.py)."""

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
from workers.file_inputs import DatabaseFiles
from workers.script_executor import ScriptResult, run_script
from workers.step_types import Claim, ScreenLock


class ScriptExecutor(ProcessExecutor):
    kind = "script"

    def handles(self, manifest: Manifest) -> bool:
        return manifest.run is not None

    def launch(self, ctx: WorkerContext, job: Claim, skill: Skill, inputs: dict[str, Any],
               secrets: Mapping[str, str], workdir: Path | None
               ) -> tuple[ScriptResult, ScreenLock | None]:
        m = skill.manifest
        assert m.run is not None
        done = run_script(skill.folder, m, inputs, secrets=secrets, timeout_s=m.run.timeout,
                          max_output_bytes=ctx.settings.max_output_bytes, workdir=workdir,
                          extra_env={STEP_MARKER: job.row_id},
                          scratch=scratch_for(job.row_id),
                          sandbox=sandboxes.current(ctx.settings),
                          files=DatabaseFiles(ctx.database_url, ctx.settings.file_max_bytes))
        return done, None
