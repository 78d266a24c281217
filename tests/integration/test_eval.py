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

from shared.db.eval_models import EvalRecord, EvalResult
from shared.db.models import PipelineRun
from shared.eval_stats import rate_difference

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


def edit_case(vault: Path, name: str, **fields: Any) -> None:
    """Set fields of the skill's one test case in its benchmarks.json."""
    bench = vault / name / "benchmarks.json"
    doc = json.loads(bench.read_text())
    doc["tests"][0].update(fields)
    bench.write_text(json.dumps(doc))


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
        (record,) = session.query(EvalRecord).filter(EvalRecord.skill == name)
        assert (record.subject, record.baseline, record.pass_rate) == ("draft", None, 0.6)
        assert record.report["cases"] == report["cases"]
    assert sources == {"eval"}
    bench = json.loads((vault / name / "benchmarks.json").read_text())
    assert {r["source"] for r in bench["runs"]} == {"eval"} and len(bench["runs"]) == 5
    assert bench["aggregates"]["success_rate"] is None  # production's alone: none ran
    production = healthy.cli("bench", name, "--source", "production", "--json",
                             "--vault", str(vault), cwd=tmp_path)
    assert production.returncode != 0 and "no finished runs" in production.stderr


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
    statement = f"[[fake:judge-{k}]] the verdict agrees with the claim"
    edit_case(vault, name, assertions=[{"judge": statement}])
    # the vault's judge model, not the daemon's default the skill runs on
    (vault / "evals.json").write_text('{"judge_model": "anthropic:claude-sonnet-4-5"}')
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
    assert {b["model"] for b in llm.bodies(f"judge-{k}")} == {"claude-sonnet-4-5"}
    assert {b["model"] for b in llm.bodies(f"eval-{k}")} == {"claude-haiku-4-5"}
    sonnet_turn = (200 * 3 + 40 * 15) / 1e6  # $3 and $15 a million tokens in and out
    assert report["judge_usd"] == pytest.approx(2 * sonnet_turn)
    assert report["cases"][0]["cost_usd"]["mean"] == pytest.approx(0.0004)
    assert report["spent_usd"] == pytest.approx(0.0008 + 2 * sonnet_turn)


def test_a_vault_judge_model_that_is_not_one_is_refused_naming_the_file(
        healthy: Stack, tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    name = agent_vault(vault, uuid.uuid4().hex[:6])
    edit_case(vault, name, assertions=[{"judge": "it holds"}])
    for text, said in (('{"judge_model": "nosuch:model"}', "judge_model: "),
                       ('{"judge": "x"}', "judge: unknown field; remove it (allowed: judge_model)"),
                       ("{", "is not readable JSON")):
        (vault / "evals.json").write_text(text)
        done = healthy.cli("eval", name, "--runs", "1", "--vault", str(vault),
                           cwd=tmp_path)
        assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
        assert str(vault / "evals.json") in done.stderr and said in done.stderr, done.stderr


def interval(c1: int, n1: int, c2: int, n2: int) -> dict[str, Any]:
    i = rate_difference(c1, n1, c2, n2)
    return {"estimate": pytest.approx(i.difference), "low": pytest.approx(i.low),
            "high": pytest.approx(i.high), "excludes_zero": i.excludes_zero}


def test_with_the_skill_against_none_and_the_assertions_that_never_discriminate(
        healthy: Stack, llm: FakeLLM, tmp_path: Path) -> None:
    k = uuid.uuid4().hex[:6]
    vault = tmp_path / "vault"
    name = agent_vault(vault, k)
    # without the skill's instructions, the request's own marker names the conversation
    edit_case(vault, name, inputs={"claim": f"[[fake:bare-{k}]] water is wet"},
              assertions=[{"schema": {"type": "object", "required": ["verdict"]}}])
    llm.script(f"eval-{k}", *answers("yes", "yes", "yes"))
    llm.script(f"bare-{k}", *answers("maybe", "yes", "maybe"))
    report = evaluate(healthy, vault, name, "--runs", "3", "--baseline", "none")
    assert (report["subject"], report["baseline"]) == ("draft", "none")
    (ours,), (theirs,) = report["cases"], report["baseline_cases"]
    assert (ours["passed"], theirs["passed"]) == (3, 1)
    (diff,) = report["differences"]
    assert diff["pass_rate"] == interval(3, 3, 1, 3)
    assert diff["cost_usd"]["estimate"] == pytest.approx(0.0)
    # met by every run of both: they say nothing of the skill; the verdict does
    assert report["non_discriminating"] == [{"case": "holds", "assertion": "success"},
                                            {"case": "holds", "assertion": "schema"}]
    # the same request to the same model, with none of the skill: its body, files, tools
    with_skill, bare = llm.bodies(f"eval-{k}")[0], llm.bodies(f"bare-{k}")[0]
    assert "Answer yes or no" in json.dumps(with_skill)
    print("BAREBODY", json.dumps(bare))
    assert "Answer yes or no" not in json.dumps(bare) and name not in json.dumps(bare)
    assert with_skill["model"] == bare["model"]
    assert {t["name"] for t in bare.get("tools", [])} <= {"final_result"}
    with healthy.db() as session:
        forms = sorted((r.arm, r.form) for r in session.query(EvalResult).filter(
            EvalResult.skill == name))
    assert forms == [("baseline", "bare")] * 3 + [("skill", "draft")] * 3


def test_published_versions_and_the_draft_compared(healthy: Stack, llm: FakeLLM,
                                                   tmp_path: Path) -> None:
    k = uuid.uuid4().hex[:6]
    vault = tmp_path / "vault"
    name = agent_vault(vault, k)
    folder = vault / name

    def publish() -> None:
        done = healthy.cli("publish", name, "--vault", str(vault), cwd=tmp_path,
                           timeout_s=120)
        assert done.returncode == 0, done.stdout + done.stderr

    llm.script(f"eval-{k}", *answers("yes"))  # publish runs the case once
    publish()
    llm.script(f"eval-{k}", *answers("yes", "no", "yes", "no"))
    first = evaluate(healthy, vault, name, "--runs", "4")
    assert (first["subject"], first["cases"][0]["passed"]) == ("v1", 2)
    # an edited folder is the draft; v1 still runs as published, from the store
    skill_md = folder / "SKILL.md"
    skill_md.chmod(0o644)
    skill_md.write_text(skill_md.read_text().replace(f"eval-{k}", f"draft-{k}"))
    llm.script(f"eval-{k}", *answers("no", "no"))
    llm.script(f"draft-{k}", *answers("yes", "yes"))
    vs = evaluate(healthy, vault, name, "--runs", "2", "--baseline", "DRAFT")
    assert (vs["subject"], vs["baseline"]) == ("v1", "draft")
    assert (vs["cases"][0]["passed"], vs["baseline_cases"][0]["passed"]) == (0, 2)
    assert vs["differences"][0]["pass_rate"] == interval(0, 2, 2, 2)
    # published as v2 and evaluated: bench puts the same cases of both side by side
    llm.script(f"draft-{k}", *answers("yes"))
    publish()
    llm.script(f"draft-{k}", *answers("yes", "yes", "yes", "yes"))
    assert evaluate(healthy, vault, name, "--runs", "4")["subject"] == "v2"
    done = healthy.cli("bench", name, "--compare", "1", "2", "--json", "--vault",
                       str(vault), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    v1, v2 = json.loads(done.stdout)
    assert "eval_compare" not in v1 and v2["eval_compare"]["against"] == 1
    (case,) = v2["eval_compare"]["cases"]
    assert case["case"] == "holds"
    assert (case["a"]["runs"], case["a"]["passed"]) == (6, 2)  # both evals of v1
    assert (case["b"]["runs"], case["b"]["passed"]) == (4, 4)
    assert case["pass_rate_difference"] == interval(4, 4, 2, 6)
    shown = healthy.cli("bench", name, "--compare", "1", "2", "--vault", str(vault),
                        cwd=tmp_path)
    assert "the same cases on v1 and v2" in shown.stderr  # piped: the rows stay parseable
    assert "holds" in shown.stderr and "2/6 (33%)" in shown.stderr


def test_a_baseline_that_is_not_one_is_refused_saying_what_is(
        healthy: Stack, tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    name = agent_vault(vault, uuid.uuid4().hex[:6])
    for baseline, said in (("other@1", "is not a baseline: give none"),
                           (f"{name}@x", "names no version"),
                           (f"{name}@7", "has no published version 7"),
                           ("DRAFT", "has no published version to weigh its draft")):
        done = healthy.cli("eval", name, "--baseline", baseline, "--vault", str(vault),
                           cwd=tmp_path)
        assert done.returncode != 0 and said in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
