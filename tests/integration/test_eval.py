"""`skillq eval` (issue 45): a skill's test cases run many times through the queues as
source `eval`, against the scripted model server; the pass rates seeded by the script,
checked against the closed-form pass@k and pass^k, and a budget that stops the eval at
the request it allows."""

from __future__ import annotations

import json
import math
import uuid
from pathlib import Path
from typing import Any

import pytest
from conftest import Stack
from support.fake_llm import FakeLLM

from shared.db.models import PipelineRun

pytestmark = pytest.mark.integration
AGENT_WORKER = "agent-gpu-cmd0"
USAGE = {"input": 200, "output": 40}  # $0.0004 a turn at claude-haiku-4-5


@pytest.fixture
def worker_env(llm: FakeLLM) -> dict[str, dict[str, str | None]]:
    return {AGENT_WORKER: {**llm.env(), "SKILLQ_AGENT_MODEL": "anthropic:claude-haiku-4-5"}}


def agent_vault(root: Path, k: str) -> str:
    name = f"verdict-{k}"
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: Say whether a claim holds. Use it to check a "
        "claim.\nversion: 1\napproach: agent\ninputs:\n"
        "  - {name: claim, type: string, required: true}\n"
        "outputs:\n  - {name: verdict, type: string}\n---\n\n"
        f"[[fake:eval-{k}]] Answer yes or no.\n")
    (folder / "benchmarks.json").write_text(json.dumps({
        "skill": name, "version": 1, "runs": [],
        "tests": [{"id": "holds", "inputs": {"claim": "water is wet"},
                   "expected": {"success": True, "verdict": "yes"}}]}))
    return name


def answers(*verdicts: str) -> list[dict[str, Any]]:
    return [{"output": {"verdict": v}, "usage": USAGE} for v in verdicts]


def evaluate(stack: Stack, vault: Path, name: str, *options: str) -> dict[str, Any]:
    done = stack.cli("eval", name, "--vault", str(vault), "--json", *options,
                     cwd=vault.parent, timeout_s=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return dict(json.loads(done.stdout))


def test_pass_rates_match_the_closed_forms(healthy: Stack, llm: FakeLLM,
                                          tmp_path: Path) -> None:
    k = uuid.uuid4().hex[:6]
    vault = tmp_path / "vault"
    name = agent_vault(vault, k)
    llm.script(f"eval-{k}", *answers("yes", "no", "yes", "yes", "no"))
    report = evaluate(healthy, vault, name, "--runs", "5", "--k", "1,2,5")
    (case,) = report["cases"]
    n, c = 5, 3
    assert (case["runs"], case["passed"], case["pass_rate"]) == (n, c, 0.6)
    for kk in (1, 2, 5):
        assert case["pass_at_k"][str(kk)] == pytest.approx(
            1 - math.comb(n - c, kk) / math.comb(n, kk))
        assert case["pass_hat_k"][str(kk)] == pytest.approx(
            math.comb(c, kk) / math.comb(n, kk))
    assert case["cost_usd"]["mean"] == pytest.approx(0.0004)
    assert case["cost_usd"]["stddev"] == pytest.approx(0.0)
    assert case["tokens"]["mean"] == 240
    assert report["stopped"] is None and report["spent_usd"] == pytest.approx(0.002)
    # recorded as eval runs, apart from production's figures
    with healthy.db() as session:
        sources = {r.source for r in session.query(PipelineRun).filter(
            PipelineRun.skill == name)}
    assert sources == {"eval"}


def test_a_budget_stops_at_the_request_it_allows(healthy: Stack, llm: FakeLLM,
                                                 tmp_path: Path) -> None:
    k = uuid.uuid4().hex[:6]
    vault = tmp_path / "vault"
    name = agent_vault(vault, k)
    llm.script(f"eval-{k}", *answers(*["yes"] * 5))
    report = evaluate(healthy, vault, name, "--runs", "5", "--budget-usd", "0.001")
    # $0.0004 a request: the third is sent while $0.0008 is spent, under $0.001; none after
    assert len(llm.requests(f"eval-{k}")) == 3
    assert report["spent_usd"] == pytest.approx(0.0012)
    assert report["stopped"] == "the budget of $0.001 was spent ($0.0012) after 3 of 5 runs"
    assert report["cases"][0]["runs"] == 3


def test_a_judge_assertion_passes_and_fails_with_its_quoted_evidence(
        healthy: Stack, llm: FakeLLM, tmp_path: Path) -> None:
    k = uuid.uuid4().hex[:6]
    vault = tmp_path / "vault"
    name = agent_vault(vault, k)
    bench = vault / name / "benchmarks.json"
    doc = json.loads(bench.read_text())
    statement = f"[[fake:judge-{k}]] the verdict agrees with the claim"
    doc["tests"][0]["assertions"] = [{"judge": statement}]
    bench.write_text(json.dumps(doc))
    llm.script(f"eval-{k}", *answers("yes", "yes"))
    llm.script(f"judge-{k}",
               {"output": {"passed": True, "evidence": "yes"}, "usage": USAGE},
               {"output": {"passed": False, "evidence": "nothing supports it"},
                "usage": USAGE})
    report = evaluate(healthy, vault, name, "--runs", "2")
    first, second = report["runs"]
    assert (first["passed"], first["problems"]) == (True, [])
    assert second["passed"] is False
    assert second["problems"] == [f"judge: '{statement}' does not hold; evidence: "
                                  "'nothing supports it'"]
    # the judge saw the run's outputs; its cost is counted apart from the skill's
    asked = llm.bodies(f"judge-{k}")[0]["messages"][0]["content"][0]["text"]
    given = json.loads(asked.split("as JSON:\n", 1)[1])
    assert json.loads(given["outputs"]) == {"verdict": "yes"}
    assert report["judge_usd"] == pytest.approx(0.0008)
    assert report["cases"][0]["cost_usd"]["mean"] == pytest.approx(0.0004)
    assert report["spent_usd"] == pytest.approx(0.0016)
