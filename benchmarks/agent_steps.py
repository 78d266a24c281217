"""Agent steps: their overhead against a direct SDK call, and the replay of a recorded step.

    .venv/bin/python benchmarks/agent_steps.py [--quick] [--runs N] [--keep]

It starts its own stack under a temporary SKILLQ_HOME: the embedded Redis and PostgreSQL
(orchestrator/embedded.py); the local model server of tests/support/fake_llm in a process
of its own, speaking OpenAI Chat Completions as Ollama or llama.cpp's server does and
answering at once from a script (so every millisecond measured is skillq's or the
client's, none the model's); and one worker, `python -m workers.main --queues
agent,control --concurrency 2`, with OPENAI_BASE_URL pointing at that server and
SKILLQ_AGENT_MODEL=openai-chat:llama3.2 (examples/agent-local/README.md). The vault:
examples/agent-local's triage-note (one turn: its first request gets its typed answer)
and bench-loop, which loads bench-doc four times with the `skill` tool before answering
(five turns).

Figures (skillq beside the direct call; the target is issue 12's, reported, not
asserted: skillq <= 1.2 x direct + 10 ms per turn):
  a         a one-turn agent step through skillq's real path: `skillq run`'s start_run
            (checks, routing, the run recorded, its first planning step), the agent
            queue, the worker, the executor and Pydantic AI, the turn and the step
            recorded, benchmarks.json, the client woken by the run's end; against one
            `openai` SDK call to the same server with the same request body (the one
            the step sent, as the server received it)
  a5        the same for the five-turn step, against its five bodies sent in sequence
  a-turn    what each turn after the first adds, (a5 - a) / 4, skillq against direct
  a-pai     (attribution) Pydantic AI alone in this process, as the executor runs it
            (the model and its client built once, one event loop kept, an Agent per
            step) and without skillq: the step's own first request (instructions, user
            message, tools, output type), none of it recorded; against the direct call
  a-pai5    the same for the five-turn step (its `skill` tool a plain function)
  a-pai-turn  what each turn after the first adds to it, (a-pai5 - a-pai) / 4: the
            part of (a-turn) that is Pydantic AI's own
  a-exec    (attribution) skillq's executor in this process (run_agent_step: prompt,
            Pydantic AI, each turn recorded in PostgreSQL): no queue, no run records
  a-exec5   the same for the five-turn step
  a-model   (attribution) pydantic_ai.models.infer_model: the model built from its
            name, a new provider and HTTP client; the executor pays it once per process
            and model (workers/agent/models.py)
  b         replay: the executor re-running a recorded five-turn step (attempt 2 of a
            step item of a5), every turn answered from agent_turns; requests sent must
            be 0 (counted by the server): beside a-exec5, which sent them
  b1        the same for a one-turn step (a step of a)
and, after the table, the phases of the one-turn run (a), from its records.

Results: a rich table, and benchmarks/results/agent-<date>.json with every sample. Every
process it started is stopped at the end, on Ctrl-C and on errors too. About a minute
on 2 cores (--quick: half).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

from agentbench.measure import Bench, Case, five_turns, interleaved, one_turn
from agentbench.stack import DOC, LOCAL_MODEL, AgentStack
from execbench.config import RESULTS, ROOT, console
from execbench.figure import Figure, med
from execbench.report import machine, source_state
from pydantic_ai import Agent, DeferredToolRequests, Tool
from pydantic_ai.models import infer_model
from rich.table import Table

from shared.agent_prompt.prompt import skill_content
from workers.agent.outputs import output_type

RATIO_TARGET, PER_TURN_MS = 1.2, 10.0


def p90(values: list[float]) -> float:
    return sorted(values)[int(0.9 * (len(values) - 1))]


def versus(key: str, name: str, sk: list[float], direct: list[float], turns: int,
           target: bool, note: str = "", **samples: Any) -> Figure:
    """A row: skillq's median beside the direct median, the ratio, and the difference
    per turn; ``target``: judged against 1.2x + 10 ms per turn."""
    s_ms, d_ms = med(sk) * 1000, med(direct) * 1000
    allowed = RATIO_TARGET * d_ms + PER_TURN_MS * turns
    return Figure(key, name, s_ms, d_ms, "ms", s_ms / d_ms,
                  f"<= {allowed:.1f} ms (1.2x + {PER_TURN_MS:g} ms x {turns})" if target
                  else "", (s_ms <= allowed) if target else None,
                  note=note or f"median of {len(sk)}; p90 {p90(sk) * 1000:.1f} vs "
                  f"{p90(direct) * 1000:.1f} ms",
                  samples={"skillq_s": sk, "direct_s": direct, "turns": turns,
                           "per_turn_diff_ms": (s_ms - d_ms) / turns, **samples})


def fig_end_to_end(b: Bench, case: Case, n: int, warm: int, key: str, name: str
                   ) -> tuple[Figure, list[tuple[str, float, float]]]:
    turns = len(case.turns)
    first = b.step(case)  # its bodies are what the direct side sends
    bodies = b.bodies(case.key, turns)
    sizes = [len(json.dumps(body)) for body in bodies]
    runs: list[tuple[str, float, float]] = [(first[1], first[2], first[2] + first[0])]
    before = b.requests(case.key)

    def through_skillq() -> float:
        took, run_id, wall = b.step(case)
        runs.append((run_id, wall, wall + took))
        return took

    sk, direct = interleaved(n, warm, through_skillq, lambda: b.direct(case, bodies))
    sent = b.requests(case.key) - before
    expected = 2 * (n + warm) * turns
    if sent != expected:
        raise RuntimeError(f"{name}: the server saw {sent} requests, not {expected}")
    fig = versus(key, name, sk, direct, turns, True,
                 request_bytes=sizes, requests_per_step=turns)
    fig.note += f"; {sum(sizes):,} request bytes per step"
    return fig, runs[1 + warm:]


def fig_marginal(one: Figure, five: Figure) -> Figure:
    s_ms = (five.skillq or 0) - (one.skillq or 0)
    d_ms = (five.raw or 0) - (one.raw or 0)
    turns = int(five.samples["turns"]) - int(one.samples["turns"])
    return Figure("a-turn", "each turn after the first (a5 - a) / 4", s_ms / turns,
                  d_ms / turns, "ms", s_ms / d_ms if d_ms > 0 else None,
                  f"<= 1.2x + {PER_TURN_MS:g} ms",
                  s_ms / turns <= RATIO_TARGET * d_ms / turns + PER_TURN_MS,
                  note="a tool call and its result: the `skill` tool loads bench-doc",
                  samples={"per_turn_diff_ms": (s_ms - d_ms) / turns})


class BareStep(NamedTuple):
    system: str
    user: str
    tools: list[Tool[None]]
    answer: Any


class BarePydanticAI:
    """(a-pai) Pydantic AI without skillq, run as the executor runs it: the model built
    once, one event loop kept, the answer's type built once, an Agent per step. What it
    sends is the step's own first request: its instructions, user message and tools (each
    a plain function; `skill` returns bench-doc, as skillq's does)."""

    def __init__(self, b: Bench) -> None:
        self.b, self.loop, self.model = b, asyncio.new_event_loop(), infer_model(LOCAL_MODEL)
        self.doc = skill_content(b.s.vault.get(DOC))

    def prepare(self, case: Case, body: dict[str, Any]) -> BareStep:
        system, user = (next(m["content"] for m in body["messages"] if m["role"] == role)
                        for role in ("system", "user"))
        specs = [t["function"] for t in body.get("tools", [])
                 if not t["function"]["name"].startswith("final_result")]  # the answer
        tools: list[Tool[None]] = [
            Tool.from_schema(self._tool(f["name"]), f["name"], f.get("description"),
                             f.get("parameters") or {}) for f in specs]
        return BareStep(system, user, tools,
                        output_type(self.b.s.vault.get(case.skill).manifest))

    def _tool(self, name: str) -> Callable[..., str]:
        return lambda **_: self.doc if name == "skill" else ""

    def run(self, case: Case, step: BareStep) -> float:
        self.b.fake.script(case.key, *case.turns)
        t0 = time.perf_counter()
        agent: Agent[None, Any] = Agent(
            self.model, output_type=[step.answer, DeferredToolRequests],
            instructions=step.system, tools=step.tools, retries={"output": 1, "tools": 3})
        self.loop.run_until_complete(agent.run(step.user))
        return time.perf_counter() - t0


def pai_case(b: Bench, bare: BarePydanticAI, case: Case, n: int, warm: int) -> Figure:
    bodies = b.bodies(case.key, len(case.turns))
    step, before = bare.prepare(case, bodies[0]), b.requests(case.key)
    bare.run(case, step)  # what it sends, beside what the step sent
    if (sent := b.requests(case.key) - before) != len(case.turns):
        raise RuntimeError(f"Pydantic AI alone sent {sent} requests, not {len(case.turns)}")
    sizes = [len(json.dumps(body)) for body in b.bodies(case.key, len(case.turns))]
    pai, direct = interleaved(n, warm, lambda: bare.run(case, step),
                              lambda: b.direct(case, bodies))
    fig = versus(f"a-pai{len(case.turns) if len(case.turns) > 1 else ''}",
                 f"Pydantic AI alone, in-process, {len(case.turns)} turn(s)", pai, direct,
                 len(case.turns), False, request_bytes=sizes)
    fig.note += (f"; {sum(sizes):,} request bytes per step (the step's: "
                 f"{sum(len(json.dumps(body)) for body in bodies):,})")
    return fig


def fig_pai(b: Bench, one: Case, five: Case, n: int, n5: int, warm: int,
            a1: Figure, turn: Figure) -> list[Figure]:
    """(a-pai), (a-pai5), (a-pai-turn); each says how much of skillq's excess over the
    direct call, (a) or (a-turn), is Pydantic AI's own."""
    bare = BarePydanticAI(b)
    try:
        p1, p5 = pai_case(b, bare, one, n, warm), pai_case(b, bare, five, n5, warm)
    finally:
        bare.loop.close()
    s_ms, d_ms = ((p5.skillq or 0) - (p1.skillq or 0)) / 4, ((p5.raw or 0) - (p1.raw or 0)) / 4
    pt = Figure("a-pai-turn", "Pydantic AI alone: each turn after the first", s_ms, d_ms,
                "ms", s_ms / d_ms if d_ms > 0 else None, note="(a-pai5 - a-pai) / 4",
                samples={"per_turn_diff_ms": s_ms - d_ms})
    for mine, whole in ((p1, a1), (pt, turn)):
        own = (mine.skillq or 0) - (mine.raw or 0)
        gap = (whole.skillq or 0) - (whole.raw or 0)
        mine.samples["share_of_skillq_excess"] = own / gap if gap > 0 else None
        mine.note += (f"; Pydantic AI's own +{own:.1f} ms of ({whole.key})'s "
                      f"+{gap:.1f} ms over direct ({own / gap:.0%})" if gap > 0 else "")
    return [p1, p5, pt]


def fig_in_process(b: Bench, one: Case, five: Case, anchor: str, n: int, warm: int
                   ) -> list[Figure]:
    bodies1, bodies5 = b.bodies(one.key, 1), b.bodies(five.key, 5)
    count = iter(range(10**9))
    # The executor's turns go to a step id of their own under a real run (the turns'
    # run id is a foreign key), so no attempt replays another's.
    ex1, ex_direct1 = interleaved(
        n, warm, lambda: b.executor(one, f"{anchor}/bench-x{next(count)}/-1/1", 1)[0],
        lambda: b.direct(one, bodies1))
    ex5, ex_direct5 = interleaved(
        n, warm, lambda: b.executor(five, f"{anchor}/bench-x{next(count)}/-1/1", 1)[0],
        lambda: b.direct(five, bodies5))
    model = [b.new_model() for _ in range(n)]
    return [versus("a-exec", "skillq's executor in-process, one turn (turn recorded)",
                   ex1, ex_direct1, 1, False),
            versus("a-exec5", "skillq's executor in-process, five turns", ex5, ex_direct5,
                   5, False),
            Figure("a-model", "the model from its name (infer_model)",
                   med(model) * 1000, None, "ms", None,
                   note=f"median of {n}: a new provider and HTTP client, whose SSL "
                   "context reads the CA bundle; paid once per process and model",
                   samples={"infer_model_s": model})]


def fig_replay(b: Bench, case: Case, run_id: str, sending: Figure, n: int, key: str,
               name: str) -> Figure:
    row = b.step_row(run_id)
    # The next attempt of a step item whose turns are all on record, as a redelivery or
    # a retry would run it: the same inputs, so the same requests, all answered.
    replay_id = f"{row.run_id}/{row.step_id}/{row.item_index}/{row.attempt + 1}"
    before = b.requests(case.key)
    took, replayed, sent = [], 0, 0
    for _ in range(n):
        seconds, done = b.executor(case, replay_id, row.attempt + 1, script=False)
        took.append(seconds)
        replayed, sent = replayed + done.turns_replayed, sent + done.turns_sent
    on_server = b.requests(case.key) - before
    turns = len(case.turns)
    s_ms, x_ms = med(took) * 1000, sending.skillq or 0.0
    return Figure(key, name, s_ms, x_ms, "ms", s_ms / x_ms if x_ms else None,
                  "requests sent = 0", on_server == 0 and sent == 0,
                  note=f"median of {n}; requests sent {on_server} (server) / {sent} "
                  f"(executor), turns replayed {replayed} of {n * turns}; beside: "
                  f"({sending.key}) sending them",
                  samples={"replay_s": took, "requests_sent": on_server,
                           "turns_sent": sent, "turns_replayed": replayed,
                           "step_row": row.id})


def render(figures: list[Figure]) -> Table:
    table = Table(title=f"skillq agent steps vs direct SDK calls ({LOCAL_MODEL}, local "
                  "server answering at once)")
    for column, justify in (("figure", "left"), ("skillq", "right"), ("direct", "right"),
                            ("ratio", "right"), ("+ms/turn", "right"), ("target", "left"),
                            ("", "center"), ("note", "left")):
        table.add_column(column, justify=justify, overflow="fold")  # type: ignore[arg-type]
    for f in figures:
        verdict = {True: "[green]met[/]", False: "[red]missed[/]", None: "[dim]info[/]"}[
            f.passed]
        diff = f.samples.get("per_turn_diff_ms")
        table.add_row(f"({f.key}) {f.name}", "-" if f.skillq is None else f"{f.skillq:.2f} ms",
                      "-" if f.raw is None else f"{f.raw:.2f} ms",
                      "-" if f.ratio is None else f"{f.ratio:.2f}x",
                      "-" if diff is None else f"{diff:+.2f}", f.target, verdict, f.note)
    return table


def write_results(figures: list[Figure], phases: dict[str, float], *, started: datetime,
                  cfg: dict[str, Any], interrupted: bool, source: dict[str, Any],
                  load_at_start: tuple[float, float, float]) -> Path:
    RESULTS.mkdir(exist_ok=True)
    suffix = ("-quick" if cfg["quick"] else "") + ("-partial" if interrupted else "")
    path = RESULTS / f"agent-{started:%Y-%m-%d-%H%M%S}{suffix}.json"
    path.write_text(json.dumps({
        "started": started.isoformat(), "interrupted": interrupted, "config": cfg,
        "model": LOCAL_MODEL, "machine": {**machine(), "load_avg_at_start": load_at_start},
        "source": source,
        "phases_ms": phases, "figures": [asdict(f) for f in figures]},
        indent=2, default=str) + "\n")
    console.print(f"results: {path.relative_to(ROOT)}")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples")
    parser.add_argument("--runs", type=int, default=None, help="samples per figure")
    parser.add_argument("--keep", action="store_true", help="keep the temporary SKILLQ_HOME")
    args = parser.parse_args(argv)
    n = args.runs or (15 if args.quick else 40)
    cfg = {"quick": args.quick, "n": n, "n5": max(5, n // 2), "warm": 6}

    def stop_on_term(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop_on_term)
    home = Path(tempfile.mkdtemp(prefix="skillq-agentbench-"))
    stack = AgentStack(home)
    figures: list[Figure] = []
    phases: dict[str, float] = {}
    started, interrupted, source = datetime.now(UTC), False, source_state()
    load_at_start = os.getloadavg()
    try:
        with console.status("starting") as status:
            stack.start(lambda text: status.update(f"[bold]{text}"))
            b = Bench(stack)
            one, five = one_turn("bench-one"), five_turns("bench-five")
            status.update("[bold](a) one-turn step vs a direct call")
            a1, runs1 = fig_end_to_end(b, one, cfg["n"], cfg["warm"], "a",
                                       "one-turn agent step, end to end")
            figures.append(a1)
            phases = b.phases(runs1)
            status.update("[bold](a5) five-turn step vs five direct calls")
            a5, runs5 = fig_end_to_end(b, five, cfg["n5"], cfg["warm"], "a5",
                                       "five-turn agent step, end to end")
            figures += [a5, fig_marginal(a1, a5)]
            status.update("[bold](a-pai) Pydantic AI alone, in-process")
            figures += fig_pai(b, one, five, cfg["n"], cfg["n5"], cfg["warm"], a1,
                               figures[-1])
            status.update("[bold]attribution: the executor in-process")
            inproc = fig_in_process(b, one, five, runs1[0][0], cfg["n"], cfg["warm"])
            figures += inproc
            status.update("[bold](b) replaying recorded steps")
            figures.append(fig_replay(b, five, runs5[0][0], inproc[1], cfg["n"], "b",
                                      "replay of a recorded five-turn step"))
            figures.append(fig_replay(b, one, runs1[0][0], inproc[0], cfg["n"], "b1",
                                      "replay of a recorded one-turn step"))
    except KeyboardInterrupt:
        interrupted = True
        console.print("[yellow]interrupted: stopping; the figures measured so far follow[/]")
    finally:
        with console.status("stopping the worker, the model server and the servers"):
            stack.stop()
        if args.keep:
            console.print(f"kept {home}")
        else:
            shutil.rmtree(home, ignore_errors=True)
    console.print(render(figures))
    if phases:
        console.print("[bold]one-turn run (a), median ms per phase, from its records:[/]")
        for name, ms in phases.items():
            console.print(f"  {ms:8.2f}  {name}")
    write_results(figures, phases, started=started, cfg=cfg, interrupted=interrupted,
                  source=source, load_at_start=load_at_start)
    return 130 if interrupted else 0  # targets are reported, not asserted


if __name__ == "__main__":
    sys.exit(main())
