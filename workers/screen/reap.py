"""Ending every process a screen step started, browsers included.

Playwright starts Chromium in a session of its own, out of reach of the host's process
group, so the step's timeout kill cannot reach it. Every process of a step inherits a
unique tag in its environment; after the step, whatever still carries it is killed.
"""

from __future__ import annotations

from workers.proc_tags import kill_tagged

TAG_VAR = "SKILLQ_SCREEN_TAG"


def reap(tag: str) -> list[int]:
    """SIGKILL the process groups of processes whose environment holds ``tag``."""
    return kill_tagged(TAG_VAR, tag)
