"""`skillq eval NAME --triggers`: does a skill's description make a model load it for
the requests it is for, and only those (seed 004: a model sees only the description)?

Each of benchmarks.json's ``triggers`` is put to the built-in ``skillq-route``, a run
on the queues (source ``eval``) whose catalog is the vault's skills, decoys and the
skill with the description tried (orchestrator/evals/catalog.py); the skills its
``skill`` tool loaded are its answer. About 40% of the queries are held out, by a hash
of their text. ``improve`` has ``skillq-describe`` propose descriptions from the train
queries the current one gets wrong (never the held-out ones); the best held-out F1
wins (ties: the current, then the shorter) and is written as a draft SKILL.md under
``<home>/evals/<name>/``, never into the vault. The budget is a hard stop.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.connect import Connection
from orchestrator.evals.catalog import catalog_folder, catalog_members, loaded_skills, write_draft
from orchestrator.evals.costs import cut_by_budget, usage_of
from orchestrator.launch import launch_routed, wait_run
from orchestrator.testing import outcome_of
from shared.agentskills import description_problems
from shared.builtin import DESCRIBE, ROUTE, builtin_skill
from shared.db.models import PipelineRun
from shared.db.session import transaction
from shared.errors import InputError
from shared.inputs import local_paths
from shared.library_tokens import library_states
from shared.plan import build_plan
from shared.problems import Problem, display_path
from shared.skill import BENCHMARKS, Skill
from shared.skillfiles import RunSource, TriggerQuery
from shared.states import RunState
from shared.vault import Vault, load_vault, resolved_root

HELD_OUT = 0.4  # the share of each kind of query held out, about
CANDIDATES = 3  # descriptions --improve has proposed
BODY_CHARS = 4000  # of the skill's instructions, what the describer reads
ProgressFn = Callable[[int, int, float], None]  # (runs ended, runs planned, USD spent)


@dataclass(frozen=True, slots=True)
class QueryResult:
    query: str
    should_trigger: bool
    held_out: bool
    loaded: tuple[str, ...]  # the skills the router loaded, in order
    triggered: bool  # this skill among them
    run_id: str
    error: str | None = None  # the run failed: counted only if it loaded a skill first

    @property
    def decided(self) -> bool:
        return self.error is None or bool(self.loaded)


@dataclass(frozen=True, slots=True)
class Score:
    tp: int = 0
    fp: int = 0
    fn: int = 0
    tn: int = 0

    @property
    def precision(self) -> float | None:  # None: it loaded the skill for no query
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else None

    @property
    def recall(self) -> float | None:  # None: no query should load it
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else None

    @property
    def f1(self) -> float:  # 2TP / (2TP + FP + FN); 1 when there was nothing to get wrong
        wrong = self.fp + self.fn
        return 2 * self.tp / (2 * self.tp + wrong) if self.tp or wrong else 1.0


def score(results: Sequence[QueryResult]) -> Score:
    """(should load it, loaded it) counted: TP, FP, FN, TN, over the decided queries."""
    seen = [(r.should_trigger, r.triggered) for r in results if r.decided]
    return Score(*(seen.count(k) for k in ((True, True), (False, True), (True, False),
                                           (False, False))))


@dataclass(frozen=True, slots=True)
class Scored:
    """One description, put to the queries (all of them unless the budget stopped it)."""

    description: str
    results: tuple[QueryResult, ...]
    complete: bool

    @property
    def train(self) -> Score:
        return score([r for r in self.results if not r.held_out])

    @property
    def held_out(self) -> Score:
        return score([r for r in self.results if r.held_out])


@dataclass(frozen=True, slots=True)
class Candidate:
    description: str
    rejected: str | None = None  # why it was not scored
    scored: Scored | None = None


@dataclass(frozen=True, slots=True)
class Improvement:
    candidates: tuple[Candidate, ...]
    best: str | None  # the description chosen; None: the current one stands
    draft: Path | None  # where it was written
    describer_run: str | None
    note: str  # what came of it, in a sentence


@dataclass(frozen=True, slots=True)
class TriggerReport:
    skill: str
    version: int
    current: Scored
    improvement: Improvement | None
    spent_usd: float
    stopped: str | None  # why it stopped short, when the budget did


def fraction(text: str) -> float:
    """Where a query's text falls in [0, 1): the first 8 bytes of its SHA-256."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") / 2 ** 64


def held_out(queries: Sequence[TriggerQuery]) -> tuple[bool, ...]:
    """Which queries are held out: those whose ``fraction`` is under HELD_OUT; of a kind
    (should, should not) with two or more queries, at least one held out and one not."""
    held = [fraction(q.query) < HELD_OUT for q in queries]
    for kind in (True, False):
        of_kind = sorted((i for i, q in enumerate(queries) if q.should_trigger is kind),
                         key=lambda i: fraction(queries[i].query))
        if len(of_kind) >= 2 and not any(held[i] for i in of_kind):
            held[of_kind[0]] = True
        if len(of_kind) >= 2 and all(held[i] for i in of_kind):
            held[of_kind[-1]] = False
    return tuple(held)


class _Runs:
    """Built-in agent runs on the queues, one at a time, under the budget."""

    def __init__(self, conn: Connection, budget_usd: float | None, total: int,
                 on_progress: ProgressFn | None) -> None:
        self.conn, self.budget, self.total, self.on_progress = conn, budget_usd, total, on_progress
        self.done, self.spent = 0, 0.0
        self.stopped: str | None = None

    def run(self, name: str, vault: Vault, given: dict[str, Any], triggered_by: str
            ) -> PipelineRun | None:
        """The ended run; None when the budget allows no more (``stopped`` says so)."""
        cap = None if self.budget is None else self.budget - self.spent
        if self.stopped is not None or (cap is not None and cap <= 0):
            self._stop()
            return None
        skill = builtin_skill(name)
        assert skill is not None  # shipped with the package
        plan = build_plan(skill, vault.skills, given).with_budget(cap)
        run = wait_run(self.conn, launch_routed(
            self.conn, vault, skill, given, plan=plan, source=RunSource.EVAL.value,
            triggered_by=triggered_by))
        usage, cut = usage_of(self.conn, run.id), cut_by_budget(self.conn, run.id)
        self.spent += usage.cost_usd
        self.done += 1
        if self.on_progress is not None:
            self.on_progress(self.done, max(self.total, self.done), self.spent)
        if cut:  # cut short: the budget's end, not the router's answer
            self._stop()
            return None
        return run

    def _stop(self) -> None:
        self.stopped = self.stopped or (f"the budget of ${self.budget:g} was spent "
                                        f"(${self.spent:.4f}) after {self.done} runs")


def run_triggers(conn: Connection, vault: Vault, skill: Skill, *, improve: bool = False,
                 budget_usd: float | None = None, candidates: int = CANDIDATES,
                 on_progress: ProgressFn | None = None) -> TriggerReport:
    """Score the skill's description on its trigger queries; with ``improve``, try
    ``candidates`` others and write the best as a draft. InputError before any run when
    there is nothing to score."""
    queries = trigger_queries(skill)
    if budget_usd is not None and budget_usd <= 0:
        raise InputError([Problem("skillq eval", "--budget-usd", "give a budget above 0 USD")])
    with transaction(conn.endpoints.database_url) as session:
        states = library_states(session, str(resolved_root(vault.root)))
    others = catalog_members(vault.skills, skill, {n for n, s in states.items() if not s.enabled})
    held = held_out(queries)
    runs = _Runs(conn, budget_usd, len(queries) * (1 + candidates * improve) + improve,
                 on_progress)

    def put(description: str) -> Scored:
        return _score(conn, runs, skill, description, others, queries, held)
    current = put(skill.manifest.description)
    found = _improve(conn, runs, vault, skill, current, candidates, put) \
        if improve and runs.stopped is None else None
    return TriggerReport(skill.name, skill.manifest.version, current, found, runs.spent,
                         runs.stopped)


def trigger_queries(skill: Skill) -> tuple[TriggerQuery, ...]:
    """The skill's trigger queries; InputError when it has none or no model may load it."""
    where = display_path(skill.folder / BENCHMARKS)
    if skill.manifest.disable_model_invocation:
        raise InputError([Problem(display_path(skill.skill_md), "disable-model-invocation",
                                  "is true: no model is ever offered this skill, so its "
                                  "description decides nothing; remove it to evaluate it")])
    queries = skill.benchmarks.triggers if skill.benchmarks is not None else ()
    if not queries:
        raise InputError([Problem(where, "triggers", "has no queries to put to the skill's "
                                  "description; add some a person might ask, each "
                                  '{"query": "...", "should_trigger": true}, and some close '
                                  'ones it should not load ("should_trigger": false)')])
    return queries


def _score(conn: Connection, runs: _Runs, skill: Skill, description: str,
           others: dict[str, tuple[str, str]], queries: Sequence[TriggerQuery],
           held: Sequence[bool]) -> Scored:
    route = builtin_skill(ROUTE)
    assert route is not None  # shipped with the package
    results: list[QueryResult] = []
    with catalog_folder(conn.settings.home, skill, description, others) as root:
        catalog = load_vault(root)
        for query, out in zip(queries, held, strict=True):
            given = local_paths(route.manifest, {"request": query.query, "library": str(root)},
                                root)
            run = runs.run(ROUTE, catalog, given, f"triggers:{skill.name}")
            if run is None:
                break
            loaded = loaded_skills(conn.endpoints.database_url, run.id)
            results.append(QueryResult(
                query.query, query.should_trigger, out, loaded, skill.name in loaded, run.id,
                None if run.state == RunState.SUCCEEDED else (run.error or run.state)))
    return Scored(description, tuple(results), len(results) == len(queries))


def _improve(conn: Connection, runs: _Runs, vault: Vault, skill: Skill, current: Scored,
             count: int, put: Callable[[str], Scored]) -> Improvement:
    misses = [{"query": r.query, "should_trigger": r.should_trigger, "loaded": list(r.loaded)}
              for r in current.results
              if not r.held_out and r.decided and r.triggered != r.should_trigger]
    given = {"skill": skill.name, "instructions": skill.body[:BODY_CHARS],
             "description": current.description, "misses": misses, "count": count}
    run = runs.run(DESCRIBE, vault, given, f"describe:{skill.name}")
    if run is None:
        return Improvement((), None, None, None, "not tried: the budget was spent")
    said = outcome_of(conn, run).outputs or {}
    if run.state != RunState.SUCCEEDED:
        return Improvement((), None, None, run.id, f"the describer failed: {run.error}")
    proposed = [str(d).strip() for d in said.get("descriptions") or []][:count]
    runs.total = runs.done + len(proposed) * len(current.results)
    tried: list[Candidate] = []
    for text in proposed:
        seen = [current.description, *(c.description for c in tried)]
        why = "; ".join(description_problems(text)) or (
            "the same as the current description" if text == current.description else
            "the same as an earlier candidate" if text in seen else None)
        if why is None and runs.stopped is not None:
            why = "not tried: the budget was spent"
        tried.append(Candidate(text, why) if why else Candidate(text, scored=put(text)))
    return _choose(conn, skill, current, tuple(tried), run.id)


def _choose(conn: Connection, skill: Skill, current: Scored,
            tried: tuple[Candidate, ...], describer_run: str) -> Improvement:
    """The best held-out F1 among the current description and the candidates scored on
    every query: ties go to the current one, then to the shorter."""
    if not current.complete:
        return Improvement(tried, None, None, describer_run, "no choice: the current "
                           "description was not put to every query")
    complete = [c.scored for c in tried if c.scored is not None and c.scored.complete]
    best = max([current, *complete], key=lambda s: (s.held_out.f1, s is current,
                                                    -len(s.description)))
    if best is current:
        return Improvement(tried, None, None, describer_run, "no candidate scored better on "
                           "the held-out queries: the current description stands")
    draft = write_draft(conn.settings.home, skill, best.description)
    return Improvement(tried, best.description, draft, describer_run,
                       f"a better description was written to {draft}")
