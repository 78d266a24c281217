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
from shared.db.agent_models import AgentTurn
from shared.db.models import PipelineRun, StepRun
from shared.db.wait_models import Wait
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


TurnsByItem = dict[tuple[str, int], list[AgentTurn]]


def turns_by_item(tree: RunTree) -> TurnsByItem:
    """The run's own agent turns (loaded with ``run_tree(turns=True)``) by step item."""
    found: TurnsByItem = defaultdict(list)
    for turn in tree.turns:
        found[(turn.step_id, turn.item_index)].append(turn)
    return found


def attempt_turns(turns: TurnsByItem, row: StepRun) -> list[AgentTurn]:
    """The turns this attempt's conversation went through, in order: those it paid for
    and those it replayed from an earlier attempt of its item (a turn's ``attempt`` is
    the one that paid). The attempt's tokens and cost on its row sum the same turns."""
    return [t for t in turns.get((row.step_id, row.item_index), [])
            if t.attempt <= row.attempt]


def _charged(row: StepRun) -> bool:
    """Whether the attempt's row carries its usage: it ended and was charged (one still
    running, or lost with its worker, has only its turns to say what it used)."""
    return row.finished_at is not None and bool(row.tokens_in or row.tokens_out
                                                or row.cost_usd)


def attempt_usage(row: StepRun, turns: list[AgentTurn]) -> dict[str, int]:
    """Tokens in, out, cache read and written: input and output as charged on the row
    (else its turns' sums), the cache from its turns."""
    charged = _charged(row)
    return {"input": row.tokens_in if charged else sum(t.tokens_in for t in turns),
            "output": row.tokens_out if charged else sum(t.tokens_out for t in turns),
            "cache_read": sum(t.cache_read for t in turns),
            "cache_write": sum(t.cache_write for t in turns)}


def attempt_cost(row: StepRun, turns: list[AgentTurn]) -> float:
    return row.cost_usd if _charged(row) else sum(t.cost_usd for t in turns)


def turn_said(turn: AgentTurn, redactor: Redactor) -> tuple[str | None, list[dict[str, Any]]]:
    """What the model answered in this turn (redacted): its text, and the tools it
    called with their arguments. The tools' results went out with the next request,
    which is not stored."""
    parts = [p for p in (turn.response or {}).get("parts") or [] if isinstance(p, dict)]
    texts = [str(p.get("content")) for p in parts
             if p.get("part_kind") == "text" and p.get("content")]
    calls = [{"name": p.get("tool_name"), "arguments": redactor.value(_arguments(p.get("args")))}
             for p in parts if p.get("part_kind") in ("tool-call", "builtin-tool-call")]
    return (redactor.text("\n".join(texts)) if texts else None), calls


def _arguments(args: Any) -> Any:
    if isinstance(args, str):  # a provider may hand them over as JSON text
        try:
            return json.loads(args)
        except ValueError:
            return args
    return {} if args is None else args


def _turn(turn: AgentTurn, redactor: Redactor, logs: bool) -> dict[str, Any]:
    found: dict[str, Any] = {
        "turn": turn.turn, "attempt": turn.attempt, "model_requested": turn.model_requested,
        "model_served": turn.model_served, "tokens_in": turn.tokens_in,
        "tokens_out": turn.tokens_out, "cache_read": turn.cache_read,
        "cache_write": turn.cache_write, "cost_usd": turn.cost_usd,
        "duration_ms": turn.duration_ms, "stop_reason": turn.stop_reason}
    if logs:
        found["text"], found["tool_calls"] = turn_said(turn, redactor)
    return found


def _attempt(row: StepRun, redactor: Redactor, turns: list[AgentTurn],
             logs: bool) -> dict[str, Any]:
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
        "tokens": attempt_usage(row, turns), "cost_usd": attempt_cost(row, turns),
        "turns": [_turn(t, redactor, logs) for t in turns],
    }


def wait_json(wait: Wait, redactor: Redactor) -> dict[str, Any]:
    """A question or approval as run-show --json and the dashboard give it."""
    return {
        "id": wait.id, "kind": wait.kind, "state": wait.state,
        "asks": redactor.text(wait.prompt), "choices": list(wait.choices or []),
        "free_text": wait.free_text, "default": redactor.value(wait.default),
        "shown": redactor.value(wait.shown or {}), "inputs": list(wait.form or []),
        "answer": redactor.value(wait.answer), "reason": redactor.text(wait.reason),
        "decided_by": wait.decided_by, "decided_at": iso(wait.decided_at),
        "asked_at": iso(wait.created_at), "deadline": iso(wait.deadline_at)}


def step_items(tree: RunTree) -> list[tuple[str, int, list[StepRun]]]:
    """(step id, item index, attempts oldest first), steps in the order they started."""
    grouped: dict[str, dict[int, list[StepRun]]] = defaultdict(lambda: defaultdict(list))
    for row in tree.steps:
        grouped[row.step_id][row.item_index].append(row)
    return [(step_id, index, sorted(rows, key=lambda r: r.attempt))
            for step_id, items in grouped.items() for index, rows in sorted(items.items())]


def run_json(session: Session, tree: RunTree, redactor: Redactor,
             logs: bool = False) -> dict[str, Any]:
    """``tree`` loaded with its turns (``run_tree(turns=True)``, with ``responses`` for
    ``logs``: each turn's text and tool calls)."""
    run = tree.run
    outputs, ref = run_outputs(session, run)
    turns = turns_by_item(tree)
    steps = []
    for step_id, index, attempts in step_items(tree):
        newest = attempts[-1]
        child = next((tree.children[r.id] for r in reversed(attempts)
                      if r.id in tree.children), None)
        steps.append({
            "step": step_id, "item": None if index < 0 else index, "skill": newest.skill,
            "version": newest.version, "state": newest.state,
            "attempts": [_attempt(r, redactor, attempt_turns(turns, r), logs)
                         for r in attempts],
            "child": None if child is None else run_json(session, child, redactor, logs),
            "waits": [wait_json(w, redactor) for w in tree.waits_of(step_id, index)],
        })
    return {
        "run_id": run.id, "skill": run.skill, "version": run.version, "state": run.state,
        "inputs": redactor.value(unpack(session, run.inputs)),
        "outputs": redactor.value(outputs), "outputs_ref": ref,
        "error": redactor.text(run.error), "failed_step": run.failed_step,
        "failed_item": run.failed_item, "started_at": iso(run.started_at),
        "finished_at": iso(run.finished_at),
        "duration_ms": _span_ms(run.started_at, run.finished_at), "source": run.source,
        "triggered_by": run.triggered_by, "retry_of": run.retry_of, "steps": steps,
    }


def dumps(document: Mapping[str, Any]) -> str:
    return json.dumps(document, indent=2, ensure_ascii=False)
