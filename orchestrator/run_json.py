"""One run's records as plain JSON (`skillq run-show --json`), secrets redacted.

The shape is documented in docs/running.md ("Reading a run back"); scripts rely on it,
so keys are only ever added, never renamed.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from orchestrator.history import RunTree
from shared.db.models import PipelineRun, StepRun
from shared.notes import skill_facts
from shared.secrets import available_names, default_file, redact, redact_value, values_for
from shared.settings import get_settings
from shared.store import REF_KEY, is_ref, unpack


@dataclass(frozen=True, slots=True)
class Redactor:
    """Hides secret values wherever they appear, and the value of any key named like a
    declared secret.

    Workers already redact what they record (outputs, tails, errors), but a run's inputs
    are stored as the caller gave them, and a worker only knows the secrets its own step
    declares: so the reader redacts again with everything this machine knows.
    """

    secrets: Mapping[str, str]
    declared: frozenset[str]

    def value(self, value: Any) -> Any:
        return redact_value(value, self.secrets, self.declared)

    def text(self, text: str | None) -> str | None:
        return None if text is None else redact(text, self.secrets)


def _runs(tree: RunTree) -> Iterator[RunTree]:
    yield tree
    for child in tree.children.values():
        yield from _runs(child)


def redactor_for(tree: RunTree) -> Redactor:
    """The secrets declared by every skill of the run (nested runs included) and every
    secret value this machine holds, declared or not: a value typed into an input is a
    leak whichever skill it belongs to."""
    declared: set[str] = set()
    for node in _runs(tree):
        vault = Path(node.run.vault)
        for name in {node.run.skill, *(row.skill for row in node.steps)}:
            declared.update(skill_facts(vault, name).auth)
    settings = get_settings()
    # available_names refuses an unsafe secrets file: better no view than an unredacted one.
    known = available_names(settings.secrets_file or default_file(settings.home))
    return Redactor(values_for({*declared, *known}), frozenset(declared))


def iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.astimezone(UTC).isoformat()


def _span_ms(start: datetime | None, end: datetime | None) -> float | None:
    return (end - start).total_seconds() * 1000 if start and end else None


def run_outputs(session: Session, run: PipelineRun) -> tuple[Any, str | None]:
    """The run's outputs as values, and the store key when they were stored by
    reference. A blob missing from the store leaves the reference itself as the value."""
    stored: Any = run.outputs
    if not is_ref(stored):
        return stored, None
    key: str = stored[REF_KEY]
    try:
        return unpack(session, stored), key
    except KeyError:
        return stored, key


def outputs_by_run(session: Session, tree: RunTree, redactor: Redactor
                   ) -> dict[str, tuple[Any, str | None]]:
    """Every run of the tree's outputs (redacted) and store key, by run id: for the text
    view, which draws them per run."""
    found = {}
    for node in _runs(tree):
        value, ref = run_outputs(session, node.run)
        found[node.run.id] = (redactor.value(value), ref)
    return found


def _attempt(row: StepRun, redactor: Redactor) -> dict[str, Any]:
    duration = row.duration_ms if row.duration_ms is not None else \
        _span_ms(row.started_at, row.finished_at)
    return {
        "attempt": row.attempt, "state": row.state, "worker": row.worker,
        "daemon": row.daemon, "route": row.route, "queue": row.queue,
        "started_at": iso(row.started_at), "finished_at": iso(row.finished_at),
        "duration_ms": duration, "error": redactor.text(row.error),
        "error_kind": row.error_kind, "exit_code": row.exit_code, "cache_hit": row.cache_hit,
        "stdout_tail": redactor.text(row.stdout_tail),
        "stderr_tail": redactor.text(row.stderr_tail),
    }


def step_items(tree: RunTree) -> list[tuple[str, int, list[StepRun]]]:
    """(step id, item index, attempts oldest first), steps in the order they started."""
    grouped: dict[str, dict[int, list[StepRun]]] = defaultdict(lambda: defaultdict(list))
    for row in tree.steps:
        grouped[row.step_id][row.item_index].append(row)
    return [(step_id, index, sorted(rows, key=lambda r: r.attempt))
            for step_id, items in grouped.items() for index, rows in sorted(items.items())]


def run_json(session: Session, tree: RunTree, redactor: Redactor) -> dict[str, Any]:
    run = tree.run
    outputs, ref = run_outputs(session, run)
    steps = []
    for step_id, index, attempts in step_items(tree):
        newest = attempts[-1]
        child = next((tree.children[r.id] for r in reversed(attempts)
                      if r.id in tree.children), None)
        steps.append({
            "step": step_id, "item": None if index < 0 else index, "skill": newest.skill,
            "version": newest.version, "state": newest.state,
            "attempts": [_attempt(r, redactor) for r in attempts],
            "child": None if child is None else run_json(session, child, redactor),
        })
    return {
        "run_id": run.id, "skill": run.skill, "version": run.version, "state": run.state,
        "inputs": redactor.value(unpack(session, run.inputs)),
        "outputs": redactor.value(outputs), "outputs_ref": ref,
        "error": redactor.text(run.error), "failed_step": run.failed_step,
        "failed_item": run.failed_item, "started_at": iso(run.started_at),
        "finished_at": iso(run.finished_at),
        "duration_ms": _span_ms(run.started_at, run.finished_at), "source": run.source,
        "triggered_by": run.triggered_by, "steps": steps,
    }


def dumps(document: Mapping[str, Any]) -> str:
    return json.dumps(document, indent=2, ensure_ascii=False)
