"""The measurements: a step through skillq, the same requests sent directly, Pydantic AI
and the executor in this process, and the replay of recorded steps."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import openai
from execbench.figure import med
from pydantic_ai import Agent
from pydantic_ai.models import infer_model
from sqlalchemy import select
from support.fake_llm import marker

from lifecycle.context import WorkerContext
from orchestrator.launch import start_run, wait_run
from shared.agent_prompt.prompt import build_prompt
from shared.db.agent_models import AgentTurn
from shared.db.models import PipelineRun, StepRun
from shared.db.session import transaction
from shared.settings import Settings
from shared.states import RunState
from workers.agent.executor import AgentOutcome, run_agent_step
from workers.agent.outputs import output_type

from .stack import DOC, LOCAL_MODEL, LOOP, LOOP_LOADS, ONE_TURN, AgentStack

RUN_TIMEOUT_S = 120.0
SETTLE_S = 0.05  # between samples: each starts on an idle worker
NOTE = ("Since this morning's release the Export to CSV button on the reports page does "
        "nothing for anyone on our team. We send these numbers to the board tomorrow.")
USAGE = {"input": 700, "output": 40}
ANSWER = {"category": "bug", "priority": "high",
          "summary": "CSV export does nothing since today's release; numbers due tomorrow."}


@dataclass
class Case:
    """One agent step to measure: its skill, conversation key and scripted turns."""

    skill: str
    key: str
    turns: list[dict[str, Any]]
    catalog: list[str] = field(default_factory=list)

    @property
    def inputs(self) -> dict[str, Any]:
        text = NOTE if self.skill == ONE_TURN else "A release note about CSV exports."
        name = "note" if self.skill == ONE_TURN else "text"
        return {name: f"{text} {marker(self.key)}"}


def one_turn(key: str) -> Case:
    return Case(ONE_TURN, key, [{"output": ANSWER, "usage": USAGE}])


def five_turns(key: str) -> Case:
    load = {"tool_calls": [{"name": "skill", "arguments": {"name": DOC}}], "usage": USAGE}
    return Case(LOOP, key, [load] * LOOP_LOADS + [{"output": {"label": "export"},
                                                   "usage": USAGE}], [DOC])


class Bench:
    def __init__(self, stack: AgentStack) -> None:
        self.s = stack
        self.fake = stack.fake
        # A direct caller's best case: one client kept open, no retries.
        self.client = openai.OpenAI(base_url=stack.fake.openai_base_url, api_key="x",
                                    max_retries=0)
        settings = Settings(_env_file=None, home=stack.home, vault=stack.vault_dir,
                            database_url=stack.db, agent_model=LOCAL_MODEL)
        self.ctx = WorkerContext(settings=settings, database_url=stack.db,
                                 vault=stack.vault_dir, hostname=socket.gethostname(),
                                 pid=os.getpid())

    # -- through skillq --------------------------------------------------------------------
    def step(self, case: Case) -> tuple[float, str, float]:
        """One run of the case's skill as `skillq run` starts and waits for it (checks,
        routing, the run recorded, queue, worker, records); seconds, run id, and when
        it was submitted (epoch s)."""
        self.fake.script(case.key, *case.turns)
        skill = self.s.vault.get(case.skill)
        wall, t0 = time.time(), time.perf_counter()
        run_id = start_run(self.s.conn, self.s.vault, skill, case.inputs, source="production",
                           triggered_by="benchmark")
        run = wait_run(self.s.conn, run_id, timeout_s=RUN_TIMEOUT_S)
        took = time.perf_counter() - t0
        if run.state != RunState.SUCCEEDED:
            raise RuntimeError(f"run {run_id} of {case.skill} {run.state}: {run.error}")
        return took, run_id, wall

    # -- the same requests, directly --------------------------------------------------------
    def direct(self, case: Case, bodies: Sequence[dict[str, Any]]) -> float:
        """The step's own request bodies sent with the openai SDK, one after the other."""
        self.fake.script(case.key, *case.turns)
        t0 = time.perf_counter()
        for body in bodies:
            reply = self.client.chat.completions.create(**body)
            call = reply.choices[0].message.tool_calls
            if not call:
                raise RuntimeError(f"direct call: no tool call in {reply}")
            json.loads(call[0].function.arguments)  # what a caller does with the answer
        return time.perf_counter() - t0

    # -- in this process ------------------------------------------------------------------
    def pydantic_ai(self, case: Case) -> float:
        """Pydantic AI on its own: the step's prompt and output type, a fresh event loop as
        the executor has, no tools but the output (a one-turn case)."""
        skill = self.s.vault.get(case.skill)
        prompt = build_prompt(skill, case.inputs, [], prompt_budget_chars=60_000,
                              catalog_budget_chars=15_000)
        self.fake.script(case.key, *case.turns)
        t0 = time.perf_counter()
        agent: Agent[None, Any] = Agent(infer_model(LOCAL_MODEL),
                                        output_type=output_type(skill.manifest),
                                        instructions=prompt.system)
        asyncio.run(agent.run(prompt.user))
        return time.perf_counter() - t0

    def new_model(self) -> float:
        """What the executor does first for every step: a model from its name (a new
        provider and HTTP client)."""
        t0 = time.perf_counter()
        infer_model(LOCAL_MODEL)
        return time.perf_counter() - t0

    def executor(self, case: Case, row_id: str, attempt: int, *, script: bool = True
                 ) -> tuple[float, AgentOutcome]:
        """workers.agent.executor.run_agent_step, as a worker calls it, in this process."""
        skill = self.s.vault.get(case.skill)
        if script:
            self.fake.script(case.key, *case.turns)
        t0 = time.perf_counter()
        done = run_agent_step(self.ctx, row_id=row_id, attempt=attempt, skill=skill,
                              inputs=case.inputs,
                              catalog_skills=[self.s.vault.get(n) for n in case.catalog],
                              timeout_s=RUN_TIMEOUT_S)
        took = time.perf_counter() - t0
        if not done.ok:
            raise RuntimeError(f"{case.skill} in-process: {done.error}")
        return took, done

    # -- what the server and the records saw --------------------------------------------------
    def requests(self, key: str) -> int:
        return len(self.fake.requests(key))

    def bodies(self, key: str, last: int) -> list[dict[str, Any]]:
        return self.fake.bodies(key)[-last:]

    def step_row(self, run_id: str) -> StepRun:
        with transaction(self.s.db) as session:
            row = session.scalars(select(StepRun).where(StepRun.run_id == run_id)).one()
            session.expunge(row)
            return row

    def phases(self, runs: Sequence[tuple[str, float, float]]) -> dict[str, float]:
        """Median ms of each phase of one-step agent runs, from their records and the
        client's clock: (run id, submitted at, seen ended at)."""
        found: dict[str, list[float]] = {}
        with transaction(self.s.db) as session:
            for run_id, submitted, seen in runs:
                run = session.get(PipelineRun, run_id)
                step = session.scalars(select(StepRun).where(StepRun.run_id == run_id)).one()
                turns = list(session.scalars(select(AgentTurn.duration_ms)
                                             .where(AgentTurn.run_id == run_id)))
                stamps = (run and run.started_at, run and run.finished_at, step.started_at,
                          step.finished_at)
                if run is None or None in stamps:
                    continue
                assert run.started_at and run.finished_at and step.started_at
                assert step.finished_at
                worker_ms = (step.finished_at - step.started_at).total_seconds() * 1000
                for name, ms in (
                        ("client: checks, routing, record the run, plan it, send the step",
                         (run.started_at.timestamp() - submitted) * 1000),
                        ("broker; the worker claims the step",
                         (step.started_at - run.started_at).total_seconds() * 1000),
                        ("worker: the agent step, model requests excluded",
                         worker_ms - sum(turns)),
                        ("worker: its model requests (Pydantic AI + SDK + server)", sum(turns)),
                        ("worker: plan again, run succeeded",
                         (run.finished_at - step.finished_at).total_seconds() * 1000),
                        ("worker: benchmarks.json, commit + NOTIFY; the client wakes",
                         (seen - run.finished_at.timestamp()) * 1000)):
                    found.setdefault(name, []).append(ms)
        return {name: round(med(ms), 2) for name, ms in found.items()}


def interleaved(n: int, warm: int, *sides: Callable[[], float]) -> list[list[float]]:
    """Each side's seconds over ``n`` rounds after ``warm``, the sides taking turns so
    they share the machine's moods."""
    out: list[list[float]] = [[] for _ in sides]
    for i in range(warm + n):
        for samples, side in zip(out, sides, strict=True):
            took = side()
            time.sleep(SETTLE_S)
            if i >= warm:
                samples.append(took)
    return out
