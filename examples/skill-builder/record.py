"""Record one build of the weekly-repo-post pipeline, end to end, against the scripted
model server (tests/support/fake_llm), and write it into this folder.

    .venv/bin/python examples/skill-builder/record.py [--keep]

From a checkout with the project installed (`scripts/bootstrap`). It starts the scripted
server with script.json, a local stack (`skillq up`) in a temporary SKILLQ_HOME
whose workers get the server's address and SKILLQ_AGENT_MODEL=anthropic:claude-haiku-4-5
from their environment, then drives the build as a person would: `skillq build --detach`,
`skillq plan revise` once the plan is proposed, `skillq approve` once it is proposed
again, `skillq wait`, `skillq plan drafts`. It writes plan.json, plan.md and
record.json, and replaces the skill folders here with those the build wrote into its
vault. Everything it started is stopped, even on failure (`skillq down`, the server).
On a failure nothing here is changed and the temporary home is kept, logs and all.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SKILLQ = Path(sys.executable).with_name("skillq")
MODEL = "anthropic:claude-haiku-4-5"
RECORDED_MODEL = f"scripted (tests/support/fake_llm), priced as {MODEL}"
# The planner's conversation is chosen by the marker in the task (script.json, "planner").
TASK = ("[[fake:planner]] Each Monday, a short post on last week's commits and open issues "
        "of a repo")
FEEDBACK = "make the default tone friendly"
ORCHESTRATOR = "weekly-repo-post"
STAGE_TIMEOUT_S = 300.0
BUILD_TIMEOUT_S = 900.0

# Run with the stack's environment: the build's cost over every run it started, and the
# build run's own times, from the database (orchestrator.build.costs).
FIGURES = """
import json, sys
from orchestrator.build import build_view, costs
from orchestrator.connect import connect
from shared.db.models import PipelineRun
from shared.db.session import transaction

conn = connect(workers=False)
total = costs(conn, build_view(conn, sys.argv[1])).total
cost, tokens_in, tokens_out = total.cost_usd, total.tokens_in, total.tokens_out
with transaction(conn.endpoints.database_url) as session:
    run = session.get(PipelineRun, sys.argv[1])
    times = [run.created_at.isoformat(), run.finished_at.isoformat()]
print(json.dumps({"cost_usd": cost, "tokens_in": tokens_in, "tokens_out": tokens_out,
                  "times": times}))
"""


class Stack:
    """`skillq` commands against one SKILLQ_HOME, with the scripted model's environment."""

    def __init__(self, work: Path, model_env: dict[str, str]) -> None:
        self.work = work
        self.home = work / "home"
        self.vault = work / "vault"
        self.vault.mkdir(parents=True)
        self.log = work / "record.log"
        drop = ("SKILLQ_", "ANTHROPIC_", "OPENAI_")
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
        self.env.update(model_env, SKILLQ_HOME=str(self.home), SKILLQ_VAULT=str(self.vault),
                        SKILLQ_AGENT_MODEL=MODEL, NO_COLOR="1", COLUMNS="200")

    def run(self, *args: str, timeout: float = 120.0, check: bool = True
            ) -> subprocess.CompletedProcess[str]:
        return self.python([str(SKILLQ), *args], timeout=timeout, check=check)

    def python(self, argv: list[str], *, timeout: float = 120.0, check: bool = True
               ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(argv, capture_output=True, text=True, encoding="utf-8",
                              cwd=self.work, env=self.env, timeout=timeout, check=False)
        with self.log.open("a", encoding="utf-8") as fh:
            fh.write(f"$ {' '.join(argv[:4])} ... (exit {proc.returncode})\n"
                     f"{proc.stdout}{proc.stderr}\n")
        if check and proc.returncode != 0:
            raise RuntimeError(f"{' '.join(argv[:3])} exited {proc.returncode}:\n"
                               f"{proc.stdout}{proc.stderr}")
        return proc

    def show(self, build_id: str) -> dict[str, Any]:
        return dict(json.loads(self.run("plan", "show", build_id, "--json").stdout))

    def until_proposed(self, build_id: str, round_: int) -> dict[str, Any]:
        deadline = time.monotonic() + STAGE_TIMEOUT_S
        while True:
            view = self.show(build_id)
            if view["stage"] == "proposed" and view["round"] == round_:
                return view
            if view["run"] in ("failed", "cancelled", "rejected") or \
                    time.monotonic() > deadline:
                raise RuntimeError(f"build {build_id} not proposed (round {round_}): {view}")
            time.sleep(1.0)


def record(stack: Stack) -> dict[str, Any]:
    """Build the pipeline once; what record.json holds, and the build's view."""
    # `skillq up` starts the workers the vault needs (none yet); `skillq build` the rest
    stack.run("up", "--vault", str(stack.vault), "--timeout", "180", timeout=300)
    started_at = datetime.now(UTC)
    build_id = stack.run("build", TASK, "--vault", str(stack.vault),
                         "--detach").stdout.split()[-1]
    stack.until_proposed(build_id, 1)
    stack.run("plan", "revise", build_id, FEEDBACK)
    stack.until_proposed(build_id, 2)
    stack.run("approve", build_id)
    waited = stack.run("wait", build_id, "--json", timeout=BUILD_TIMEOUT_S, check=False)
    view = stack.show(build_id)
    if waited.returncode != 0 or view["run"] != "succeeded":
        raise RuntimeError(f"build {build_id} ended {view['run']}: {view['error']}\n"
                           f"{waited.stdout}{waited.stderr}")
    stack.run("plan", "drafts", build_id, "--vault", str(stack.vault))
    figures = json.loads(stack.python([sys.executable, "-c", FIGURES, build_id]).stdout)
    created, finished = (datetime.fromisoformat(t) for t in figures["times"])
    return {
        "model": RECORDED_MODEL,
        "started_at": started_at.isoformat(timespec="seconds"),
        "duration_s": round((finished - created).total_seconds(), 1),
        "cost_usd": round(figures["cost_usd"], 6),
        "tokens_in": figures["tokens_in"],
        "tokens_out": figures["tokens_out"],
        "build_id": build_id,
        "skills": {name: entry.get("state") for name, entry in sorted(view["skills"].items())},
        "view": view,
    }


def write_example(stack: Stack, recorded: dict[str, Any]) -> None:
    """plan.json, plan.md, record.json, and the built skill folders, into this folder."""
    from shared.build_compile import plan_md
    from shared.build_plan import BuildPlan

    plan = recorded.pop("view")["plan"]
    (HERE / "plan.json").write_text(json.dumps(plan, indent=2, ensure_ascii=False) + "\n",
                                    encoding="utf-8")
    (HERE / "plan.md").write_text(plan_md(BuildPlan.model_validate(plan)), encoding="utf-8")
    (HERE / "record.json").write_text(json.dumps(recorded, indent=2) + "\n",
                                      encoding="utf-8")
    for old in HERE.iterdir():  # the last recording's skill folders
        if old.is_dir() and (old / "SKILL.md").is_file():
            shutil.rmtree(old)
    for folder in sorted(stack.vault.iterdir()):
        if folder.is_dir() and not folder.name.startswith("."):
            shutil.copytree(folder, HERE / folder.name)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true",
                        help="keep the temporary home and vault (kept anyway on a failure)")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "tests" / "support"))
    from fake_llm import FakeLLMProcess

    work = Path(tempfile.mkdtemp(prefix="skillq-skill-builder-"))
    failed = True
    try:
        with FakeLLMProcess(HERE / "script.json") as llm:
            stack = Stack(work, llm.env())
            try:
                recorded = record(stack)
                left = {k: n for k, n in llm.remaining().items() if n}
                if left:
                    raise RuntimeError(f"scripted turns never asked for: {left}")
            finally:
                stack.run("down", check=False, timeout=180)
        write_example(stack, recorded)
        failed = False
        print(json.dumps(recorded, indent=2))
    finally:
        if failed or args.keep:
            print(f"kept {work} (record.log, home/logs)", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
