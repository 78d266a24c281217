"""How fast is validation on a big vault? Generate one, then time loading and `skillq validate`.

    .venv/bin/python benchmarks/validate_vault.py [--skills N] [--keep DIR] [--profile]

The generated vault (default 2,000 skills, in a temporary folder) is a realistic mix:
script leaves with a real main.py, agent (instruction-only) skills, and orchestrators of
3-6 steps that call earlier skills, fan out with for_each and pass outputs along; every
skill has plan.md, benchmarks.json and sub-skills.json. It must validate with no problem,
so the timings cover the full contract (fields, commands, references, types across
steps, sub-skills, benchmarks), not a fast path for broken files.

Timed:
  (a) shared.vault.load_vault in this process: read + check every skill, uncached
      (best of 3);
  (b) `skillq validate VAULT` as a subprocess: what a user waits for, interpreter start
      and imports included (best of 3).
Target: well under 1 s per 100 skills.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import random
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from shared.vault import load_vault

ROOT = Path(__file__).resolve().parents[1]
SKILLQ = Path(sys.executable).with_name("skillq")
TARGET_MS_PER_100 = 1000.0
console = Console(highlight=False)

VERBS = ("fetch", "parse", "summarize", "rank", "translate", "extract", "classify", "merge",
         "render", "score", "clean", "enrich", "tag", "chart", "digest", "audit")
NOUNS = ("feed", "invoice", "ticket", "commit", "article", "review", "transcript", "email",
         "metric", "report", "log", "comment", "listing", "release", "lead", "survey")
APIS = ("github", "youtube", "stripe", "notion", "slack", "hubspot", "openweather")

LEAF_SCRIPT = '''"""{name}: the skillq script protocol (inputs file in, outputs file out)."""

import json
import os
import sys


def main() -> int:
    with open(os.environ["SKILL_INPUTS"], encoding="utf-8") as fh:
        inputs = json.load(fh)
    text = inputs["text"].strip()
    if not text:
        print("text is empty: nothing to {verb}", file=sys.stderr)
        return 1
    words = text.split()[: inputs.get("limit", 10)]
    items = [f"{{w}}:{{t}}" for w in words for t in inputs.get("tags") or ["{noun}"]]
    outputs = {{"result": "{verb} " + " ".join(words), "items": items, "count": len(items)}}
    with open(os.environ["SKILL_OUTPUT"], "w", encoding="utf-8") as fh:
        json.dump(outputs, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
'''

PLAN = """# {name}: build plan

## Research
{research}

## Approach
{approach}: {why}

## Inputs and outputs
`text` in; `result` (string) and `items` (string[]) out{extra}.

## Edge cases
Empty text fails permanently (exit 1); rate limits and timeouts exit 75 and are retried.
"""

EMPTY_AGGREGATES = {"total_runs": 0, "success_rate": None, "avg_duration_ms": None,
                    "avg_cost_usd": None, "last_run": None}


@dataclass
class Made:
    name: str
    kind: str  # script | agent | orchestrator
    description: str
    steps: int = 0
    fan_outs: int = 0
    callees: list[str] = field(default_factory=list)


def _dump(front: dict[str, Any]) -> str:
    return yaml.safe_dump(front, sort_keys=False, allow_unicode=True, width=100)


def _write(folder: Path, front: dict[str, Any], body: str, plan: str,
           tests: list[dict[str, Any]], sub: list[dict[str, str]]) -> None:
    folder.mkdir()
    (folder / "SKILL.md").write_text(f"---\n{_dump(front)}---\n\n{body}", encoding="utf-8")
    (folder / "plan.md").write_text(plan, encoding="utf-8")
    (folder / "benchmarks.json").write_text(json.dumps(
        {"skill": front["name"], "version": 1, "tests": tests, "runs": [],
         "aggregates": EMPTY_AGGREGATES}, indent=2), encoding="utf-8")
    (folder / "sub-skills.json").write_text(json.dumps({"sub_skills": sub}, indent=2),
                                            encoding="utf-8")


def _io(front: dict[str, Any], *, leaf: bool) -> None:
    front["inputs"] = [
        {"name": "text", "type": "string", "required": True,
         "description": "The text to work on."},
        {"name": "limit", "type": "integer", "default": 10,
         "description": "At most this many words are used."},
        {"name": "tags", "type": "string[]", "default": [],
         "description": "Labels attached to every item."},
    ] if leaf else [
        {"name": "text", "type": "string", "required": True, "description": "The topic."},
        {"name": "style", "type": "string", "default": "plain", "description": "Tone."},
    ]
    front["outputs"] = [
        {"name": "result", "type": "string", "description": "One-line result."},
        {"name": "items", "type": "string[]", "description": "One entry per item found."},
    ] + ([{"name": "count", "type": "integer", "description": "len(items)."}] if leaf else [])


def make_leaf(root: Path, name: str, verb: str, noun: str, rng: random.Random) -> Made:
    approach = rng.choice(("code", "code", "api", "web"))
    source = f" from the {rng.choice(APIS)} API" if approach == "api" else ""
    description = (f"{verb.title()} a {noun} given as text and return a one-line result with "
                   f"one item per word. Use it when a pipeline needs to {verb} {noun} "
                   f"data{source}.")
    front: dict[str, Any] = {"name": name, "description": description, "version": 1,
                             "label": f"{verb.title()} {noun}", "approach": approach}
    _io(front, leaf=True)
    front["run"] = {"command": "python3 main.py", "timeout": rng.choice((30, 60, 120)),
                    "retries": 3}
    if approach == "api":
        front["auth"] = [f"{rng.choice(APIS)}_api_key"]
    if approach == "web":
        front["requires"] = {"capabilities": ["browser"]}
    if approach == "code" and rng.random() < 0.5:
        front["cache"] = {"enabled": True, "ttl": 3600}
    front.update(tools_used=[], model=None, estimated_cost="$0.00", estimated_duration="2s")
    tests = [
        {"id": "test-001", "name": "Words become items", "inputs": {"text": f"a {noun} here",
                                                                    "tags": ["x"]},
         "expected": {"success": True, "count": 3, "output_contains": [f"{noun}:x"],
                      "max_duration_ms": 10000}},
        {"id": "test-002", "name": "Empty text fails clearly", "inputs": {"text": "  "},
         "expected": {"success": False, "error_contains": "text is empty"}},
    ]
    _write(root / name, front,
           f"# {name}\n\nRun `main.py`: it reads `text`, splits it into words (at most "
           f"`limit`) and returns one item per word and tag.\n",
           PLAN.format(name=name, research=f"Looked at how {noun}s arrive in practice.",
                       approach=approach, why="cheapest approach that gets the data",
                       extra=", `count` (integer)"),
           tests, [])
    (root / name / "main.py").write_text(LEAF_SCRIPT.format(name=name, verb=verb, noun=noun),
                                         encoding="utf-8")
    return Made(name, "script", description)


def make_agent(root: Path, name: str, verb: str, noun: str, rng: random.Random,
               earlier: list[Made]) -> Made:
    description = (f"{verb.title()} {noun}s the way an editor would: read the text, judge "
                   f"it and write the result. Use it when {noun}s need judgement, not rules.")
    front: dict[str, Any] = {"name": name, "description": description, "version": 1,
                             "approach": "agent"}
    _io(front, leaf=False)
    front.update(tools_used=["read", "write"], model="claude-sonnet-4",
                 estimated_cost="$0.02", estimated_duration="20s")
    helpers = [m for m in earlier if m.kind == "script"]
    uses = rng.sample(helpers, k=min(len(helpers), rng.choice((0, 0, 1, 2))))
    sub = [{"skill_id": m.name, "role": m.description.split(". ")[0]} for m in uses]
    body = (f"# {name}\n\n1. Read `text`.\n2. {verb.title()} it in the `style` asked for.\n"
            + "".join(f"3. Use `{m.name}` for the mechanical part.\n" for m in uses)
            + "4. Return `result` (one line) and `items` (one per point).\n")
    tests = [{"id": "test-001", "name": "A short text", "inputs": {"text": f"one {noun}"},
              "expected": {"success": True, "output_contains": [noun]}}]
    _write(root / name, front, body,
           PLAN.format(name=name, research="Compared rules against an LLM on 20 samples.",
                       approach="agent", why="needs judgement", extra=""),
           tests, sub)
    return Made(name, "agent", description, callees=[m.name for m in uses])


def make_orchestrator(root: Path, name: str, verb: str, noun: str, rng: random.Random,
                      earlier: list[Made]) -> Made:
    description = (f"{verb.title()} many {noun}s end to end: fan out over the texts, "
                   f"process each, then combine. Use it for a recurring {noun} roundup.")
    front: dict[str, Any] = {"name": name, "description": description, "version": 1,
                             "inputs": [
                                 {"name": "text", "type": "string", "required": True,
                                  "description": "The topic of the run."},
                                 {"name": "texts", "type": "string[]", "default": [],
                                  "description": "One text per item to process."}]}
    n_steps = rng.randint(3, 6)
    steps: list[dict[str, Any]] = []
    fanned: set[str] = set()
    callees: list[Made] = []
    pool = earlier[-300:]  # recent skills: keeps call depth and reuse realistic
    for i in range(n_steps):
        callee = rng.choice(pool)
        callees.append(callee)
        sid = f"{callee.name.split('-')[0]}_{i + 1}"
        step: dict[str, Any] = {"id": sid, "skill": callee.name}
        with_: dict[str, Any] = {}
        last = i == n_steps - 1
        prev = [s["id"] for s in steps]
        if i == 0:
            step["for_each"] = "${inputs.texts}"
            with_["text"] = "${item}"
            step["on_failure"] = "skip"
        elif not last and rng.random() < 0.4:
            step["for_each"] = f"${{steps.{rng.choice(prev)}.outputs.items}}"
            with_["text"] = "${item}"
            step["on_failure"] = rng.choice(("skip", "continue"))
        else:
            src = rng.choice(prev)
            with_["text"] = (f"${{steps.{src}.outputs.result}}" if src not in fanned
                             else f"Combined: ${{steps.{src}.outputs.result}}")
        if callee.kind == "script" and rng.random() < 0.5:
            with_["limit"] = rng.choice((5, 20))
            if prev:
                with_["tags"] = f"${{steps.{rng.choice(prev)}.outputs.items}}"
        elif callee.kind == "agent":
            with_["style"] = rng.choice(("plain", "${inputs.text}"))
        elif callee.kind == "orchestrator" and prev:
            with_["texts"] = f"${{steps.{rng.choice(prev)}.outputs.items}}"
        step["with"] = with_
        if len(prev) > 1 and rng.random() < 0.2:
            step["needs"] = [prev[0]]
        if "for_each" in step:
            fanned.add(sid)
        steps.append(step)
    front["outputs"] = [
        {"name": "result", "type": "string", "description": "The combined result.",
         "from": f"${{steps.{steps[-1]['id']}.outputs.result}}"},
        {"name": "items", "type": "string[]", "description": "Every item of the first step.",
         "from": f"${{steps.{steps[0]['id']}.outputs.items}}"},
    ]
    front["steps"] = steps
    front.update(estimated_cost="$0.05", estimated_duration="1m")
    distinct = list(dict.fromkeys(c.name for c in callees))
    by_name = {c.name: c for c in callees}
    sub = [{"skill_id": n, "role": by_name[n].description.split(". ")[0]} for n in distinct]
    tests = [{"id": "test-001", "name": "Two texts", "inputs": {
        "text": f"{noun} roundup", "texts": [f"first {noun}", f"second {noun}"]},
        "expected": {"success": True, "max_duration_ms": 60000}}]
    _write(root / name, front,
           f"# {name}\n\nSteps: " + ", ".join(f"`{s['id']}` ({s['skill']})" for s in steps)
           + ". Dependencies come from the references.\n",
           PLAN.format(name=name, research="Mapped the manual process step by step.",
                       approach="orchestrator", why="composes tested skills", extra=""),
           tests, sub)
    return Made(name, "orchestrator", description, steps=n_steps, fan_outs=len(fanned),
                callees=distinct)


def generate(root: Path, count: int, seed: int) -> list[Made]:
    rng = random.Random(seed)
    made: list[Made] = []
    with Progress(TextColumn("generating"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console, transient=True) as progress:
        task = progress.add_task("skills", total=count)
        for i in range(count):
            verb, noun = rng.choice(VERBS), rng.choice(NOUNS)
            roll = rng.random()
            if i < 10 or roll < 0.55:
                name = f"{verb}-{noun}-{i:05d}"
                made.append(make_leaf(root, name, verb, noun, rng))
            elif roll < 0.80:
                name = f"{verb}-{noun}-notes-{i:05d}"
                made.append(make_agent(root, name, verb, noun, rng, made))
            else:
                name = f"{verb}-{noun}-pipeline-{i:05d}"
                made.append(make_orchestrator(root, name, verb, noun, rng, made))
            progress.advance(task)
    return made


def best_of(runs: int, fn: Any) -> tuple[float, Any]:
    best, result = float("inf"), None
    for _ in range(runs):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def validate_cli(vault: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SKILLQ), "validate", str(vault)], capture_output=True,
                          text=True, timeout=600, cwd=vault.parent)


def profile(vault: Path, top: int) -> None:
    profiler = cProfile.Profile()
    profiler.enable()
    load_vault(vault)
    profiler.disable()
    stats = pstats.Stats(profiler)
    rows = [(key, value) for key, value in stats.stats.items()
            if "/shared/" in key[0]]
    rows.sort(key=lambda kv: kv[1][3], reverse=True)  # cumulative time
    table = Table(title=f"load_vault hotspots in shared/ (top {top} by cumulative time, "
                  "under cProfile)")
    for column in ("function", "calls", "own s", "cumulative s"):
        table.add_column(column, justify="left" if column == "function" else "right")
    for (path, line, func), (_cc, calls, own, cumulative, _callers) in rows[:top]:
        where = f"{Path(path).relative_to(ROOT)}:{line} {func}"
        table.add_row(where, str(calls), f"{own:.3f}", f"{cumulative:.3f}")
    console.print(table)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--skills", type=int, default=2000, help="vault size (default 2000)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--runs", type=int, default=3, help="best of this many (default 3)")
    parser.add_argument("--keep", type=Path, help="write the vault here and keep it")
    parser.add_argument("--profile", action="store_true",
                        help="also profile load_vault and list the hotspots in shared/")
    args = parser.parse_args()
    if args.skills < 10:
        parser.error("--skills must be at least 10")

    base = Path(tempfile.mkdtemp(prefix="skillq-bench-"))
    vault = args.keep if args.keep else base / "vault"
    try:
        if vault.exists():
            parser.error(f"{vault} already exists")
        vault.mkdir(parents=True)
        start = time.perf_counter()
        made = generate(vault, args.skills, args.seed)
        kinds = {k: sum(m.kind == k for m in made) for k in ("script", "agent", "orchestrator")}
        console.print(
            f"generated {len(made)} skills in {time.perf_counter() - start:.1f} s: "
            f"{kinds['script']} script leaves, {kinds['agent']} agent skills, "
            f"{kinds['orchestrator']} orchestrators "
            f"({sum(m.steps for m in made)} steps, {sum(m.fan_outs for m in made)} for_each)"
            f" in {vault}")

        load_s, loaded = best_of(args.runs, lambda: load_vault(vault))
        if loaded.problems or len(loaded.skills) != args.skills:
            for problem in loaded.problems[:20]:
                console.print(str(problem), markup=False)
            console.print(f"[red]the generated vault is not valid: {len(loaded.problems)} "
                          f"problem(s), {len(loaded.skills)} skill(s) loaded[/]")
            return 1
        cli_s, proc = best_of(args.runs, lambda: validate_cli(vault))
        if proc.returncode != 0:
            console.print(proc.stdout[-2000:] + proc.stderr[-2000:], markup=False)
            console.print(f"[red]skillq validate exited {proc.returncode}[/]")
            return 1

        table = Table(title=f"validation speed, best of {args.runs}")
        for column in ("measure", "skills", "seconds", "ms / 100 skills", "target", ""):
            table.add_column(column, justify="right" if column != "measure" else "left")
        for label, seconds in (("load_vault (in-process)", load_s),
                               ("skillq validate (CLI)", cli_s)):
            per_100 = seconds * 1000 * 100 / args.skills
            ok = per_100 < TARGET_MS_PER_100
            table.add_row(label, f"{args.skills:,}", f"{seconds:.2f}", f"{per_100:.0f}",
                          f"< {TARGET_MS_PER_100:.0f}", "[green]✓[/]" if ok else "[red]✗[/]")
        console.print(table)
        if args.profile:
            profile(vault, top=15)
        return 0
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
