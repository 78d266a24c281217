"""`skillq new`: the uniform skill layout, valid from the first minute."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from shared import agentskills
from shared.atomic import write_json, write_text
from shared.errors import ExportError, VaultError
from shared.problems import display_path
from shared.skill import Skill
from shared.skillfiles import Aggregates

LEAF_SCRIPT = '''"""{name}: reads its inputs, writes its outputs (the skillq script protocol)."""

import json
import os
import sys


def main() -> int:
    with open(os.environ["SKILL_INPUTS"], encoding="utf-8") as fh:
        inputs = json.load(fh)
    text = inputs["text"]
    if not text.strip():
        print("text is empty: give some text to work on", file=sys.stderr)
        return 1  # permanent failure; exit 75 would mean "transient, retry me"
    outputs = {{"result": text.upper()}}
    with open(os.environ["SKILL_OUTPUT"], "w", encoding="utf-8") as fh:
        json.dump(outputs, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
'''

PLAN = """# {name}: build plan

## What it does
One responsibility, in one sentence.

## Approach
Why this approach (API, then code, web, dom0, cmd0: cheapest first) and what was ruled out.

## Inputs and outputs
What each input means and what the outputs look like.

## Edge cases
What fails, how it is reported (exit 1 permanent, exit 75 transient).
"""


def _dump(front: dict[str, object]) -> str:
    return yaml.safe_dump(front, sort_keys=False, allow_unicode=True, width=100)


def new_skill(vault_root: Path, name: str, *, calls: list[Skill]) -> Path:
    """Create ``vault_root/name``: a script leaf, or an orchestrator when ``calls`` is given."""
    problems = agentskills.name_problems(name, name)
    if problems:
        raise VaultError(f"'{name}' is not a valid skill name: {'; '.join(problems)}")
    folder = vault_root / name
    if folder.exists():
        raise VaultError(f"{display_path(folder)} already exists; choose another name")
    if not vault_root.is_dir():
        raise VaultError(f"vault {display_path(vault_root)} does not exist; create it or pass "
                         "--vault PATH")
    staging = vault_root / f".{name}.partial"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    front: dict[str, object] = {
        "name": name,
        "description": f"TODO: what {name} does and when to use it.",
        "version": 1,
    }
    tests: list[dict[str, object]] = []
    if calls:
        inputs, steps = _wire(calls)
        front.update(inputs=inputs, outputs=[], steps=steps)
        unique = {c.name: c for c in calls}.values()
        sub = [{"skill_id": c.name, "role": c.manifest.description.split(". ")[0]}
               for c in unique]
        body = (f"# {name}\n\nAn orchestrator: its steps call "
                + ", ".join(f"`{c.name}`" for c in calls) + ".\n")
    else:
        front.update(
            approach="code",
            inputs=[{"name": "text", "type": "string", "required": True,
                     "description": "The text to work on."}],
            outputs=[{"name": "result", "type": "string", "description": "The result."}],
            run={"command": "python3 main.py", "timeout": 60, "retries": 3},
        )
        tests = [{"id": "test-001", "name": "Upper-cases its input", "inputs": {"text": "hi"},
                  "expected": {"success": True, "result": "HI"}},
                 {"id": "test-002", "name": "Empty text fails clearly", "inputs": {"text": " "},
                  "expected": {"success": False, "error_contains": "text is empty"}}]
        sub = []
        body = f"# {name}\n\nTODO: instructions: what the script does, step by step.\n"
        write_text(staging / "main.py", LEAF_SCRIPT.format(name=name))
    write_text(staging / "SKILL.md", f"---\n{_dump(front)}---\n\n{body}")
    write_text(staging / "plan.md", PLAN.format(name=name))
    write_json(staging / "benchmarks.json", {
        "skill": name, "version": 1, "tests": tests, "runs": [],
        "aggregates": Aggregates().model_dump(mode="json")})
    write_json(staging / "sub-skills.json", {"sub_skills": sub})
    try:
        staging.rename(folder)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise ExportError(f"could not create {display_path(folder)}: {exc}") from None
    return folder


def _wire(calls: list[Skill]) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    """Steps calling each skill, their required inputs taken from same-named inputs."""
    inputs: dict[str, dict[str, object]] = {}
    steps: list[dict[str, object]] = []
    used: set[str] = set()
    for callee in calls:
        step_id = callee.name.replace("-", "_")
        while step_id in used:
            step_id += "_2"
        used.add(step_id)
        with_: dict[str, str] = {}
        for spec in callee.manifest.inputs:
            if spec.required:
                inputs.setdefault(spec.name, {"name": spec.name, "type": spec.type,
                                              "required": True,
                                              "description": spec.description})
                with_[spec.name] = f"${{inputs.{spec.name}}}"
        step: dict[str, object] = {"id": step_id, "skill": callee.name}
        if with_:
            step["with"] = with_
        steps.append(step)
    return list(inputs.values()), steps
