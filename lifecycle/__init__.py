"""The run lifecycle: what client and worker processes both execute.

Planning a run forward (planner), the one writer of run and step states (transitions),
the Celery adapter (canvas), routing, the control tasks, and the records a run leaves
(benchmarks.json windows). orchestrator/ (the control plane) and workers/ (the data
plane) both import this package; it imports neither (import-linter contracts in
pyproject.toml). The map: docs/architecture.md.
"""
