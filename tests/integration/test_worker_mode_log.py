"""A worker says in its log how its steps are isolated, once, when it starts
(docs/security.md). It used to log the line before Celery had set up logging, so an
isolated worker's line (an INFO record) reached no handler and was never written."""

from __future__ import annotations

import pytest
from conftest import Stack, WorkerSpec, nodename, wait_until

from shared.settings import Settings
from workers import sandbox

pytestmark = pytest.mark.integration
SPEC = WorkerSpec("modelog", "modelog", 1)  # a queue of its own: it takes no one's work
LINE = "steps run in: "


def test_a_started_worker_logs_its_sandbox_mode_once(stack: Stack) -> None:
    log = stack.home / "logs" / f"worker-{SPEC.name}.log"
    start = log.stat().st_size if log.exists() else 0  # the file is appended to

    def mode_lines() -> list[str]:
        text = log.read_bytes()[start:].decode(errors="replace")
        return [ln for ln in text.splitlines() if LINE in ln]

    stack.start_worker(SPEC)
    try:
        wait_until(lambda: stack.app.control.ping(destination=[nodename(SPEC.name)],
                                                  timeout=0.5), 60,
                   f"worker {SPEC.name} to answer", every_s=0.1)
        # Once it answers, it is ready: the worker_ready signal that logs the line has run.
        lines = wait_until(mode_lines, 10, f"'{LINE}' in {log}", every_s=0.1)
    finally:
        stack.workers.pop(SPEC.name).stop()
    assert len(mode_lines()) == 1, lines
    # The mode it found is the one this machine gives the stack's settings: as CI runs
    # the tests (root, bubblewrap), an isolated one, logged at INFO.
    mode = sandbox.check(Settings(_env_file=None, home=stack.home))
    assert mode.startswith("bubblewrap"), mode
    assert lines[0].endswith(f"INFO/MainProcess] {LINE}{mode}"), lines
