"""Which folder a step runs, and proof that it is the published one.

The rule (docs/publishing.md): a step asks for skill NAME at version V (the plan froze V:
a `NAME@V` pin, or the vault's version when the run started).

- The vault's folder declares V and V was never published: it runs as it is (a skill
  nobody published yet).
- The vault's folder declares V and V is published: the folder must hash to what was
  published. If it differs it is a *draft* (edited since publish, its manifest still
  saying V). A production run runs V as published, rebuilt from the shared store, so
  the pipeline keeps working while someone edits it; a test, build or eval run (source
  ``test_window`` / ``build`` / ``eval``, as `skillq test`, `skillq try` and `skillq
  eval` start) runs the draft, since trying a draft is how it gets ready to publish,
  unless its step is pinned to V (a ``NAME@V`` pin, an eval's published version).
- The vault's folder declares another version: V is rebuilt from the shared store under
  ``SKILLQ_HOME/published/NAME/V/NAME`` (read-only), verified, and run from there. V
  never published: refused.

The check itself, and why it is cheap per step, is shared/published.py's ``verify``
(`skillq run` uses it too, for a published orchestrator).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lifecycle.context import WorkerContext
from shared.db.models import PipelineRun, StepRun
from shared.db.session import transaction
from shared.errors import FolderChanged, VersionNotPublished
from shared.folderhash import stat_signature
from shared.published import PublishedFiles, published_files, verify
from shared.published_copy import published_copy
from shared.skill import Skill
from shared.skillfiles import RunSource

if TYPE_CHECKING:
    from workers.step_types import Claim

DRAFT_SOURCES = frozenset({RunSource.TEST_WINDOW.value, RunSource.BUILD.value,
                           RunSource.EVAL.value})
REFUSED = (FolderChanged, VersionNotPublished)  # a step fails with one of these, unrun


def _runs_draft(ctx: WorkerContext, job: Claim) -> bool:
    """Whether a step of a draft's version runs the draft: in a run of a draft source,
    where its plan did not pin the published version."""
    with transaction(ctx.database_url) as session:
        row = session.get(StepRun, job.row_id)
        if row is None or row.source not in DRAFT_SOURCES:
            return False
        run = session.get(PipelineRun, job.run_id)
        steps = (run.plan or {}).get("steps", []) if run is not None else []
        return not any(s.get("pinned") for s in steps if s.get("id") == job.step_id)


def _from_store(ctx: WorkerContext, files: PublishedFiles) -> Skill:
    return published_copy(ctx.settings.home, ctx.database_url, files)


def skill_for_step(ctx: WorkerContext, job: Claim, vault_skill: Skill) -> Skill:
    """The skill (and folder) this step attempt must run; FolderChanged or
    VersionNotPublished when there is none it may run."""
    if vault_skill.manifest.version != job.version:
        files = published_files(ctx.database_url, job.skill, job.version)
        if files is None:
            raise VersionNotPublished(job.skill, job.version, vault_skill.manifest.version)
        return _from_store(ctx, files)
    signature = stat_signature(vault_skill.folder)  # before the lookup: shared/published.py
    files = published_files(ctx.database_url, job.skill, job.version, signature,
                            ttl_s=ctx.settings.discovery_ttl_s)
    if files is None:
        return vault_skill
    found = verify(vault_skill.folder, files, signature)
    if not found or _runs_draft(ctx, job):
        return vault_skill
    # A draft waits for its publish: production runs the published files meanwhile.
    return _from_store(ctx, files)
