"""`skillq status`'s rows: every process of the local stack under a SKILLQ_HOME, the
embedded servers (embedded.py), the workers (local_stack.py) and the local API
(api/process.py), running or not."""

from __future__ import annotations

from pathlib import Path

from orchestrator.api.process import api_service
from orchestrator.embedded import embedded_status
from orchestrator.local_stack import worker_services
from orchestrator.processes import Service


def stack_status(home: Path) -> list[Service]:
    """The embedded servers, workers and local API ever started under home."""
    home = home.expanduser().resolve()
    api = api_service(home)
    return [*embedded_status(home), *worker_services(home), *([api] if api else [])]
