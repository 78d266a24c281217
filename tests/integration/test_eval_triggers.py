"""`skillq eval NAME --triggers` (issue 45): a skill's trigger queries put to the built-in
router on the queues (source eval) against the scripted model server; precision and
recall on the held-out split checked against hand-computed values, `--improve` choosing
by held-out score and writing a draft only, and the budget as a hard stop."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from conftest import Stack
from support.fake_llm import FakeLLM

from shared.db.models import PipelineRun
from shared.db.publish_models import PublishedVersion

pytestmark = pytest.mark.integration
AGENT_WORKER = "agent-gpu-cmd0"
USAGE = {"input": 200, "output": 40}  # $0.0004 a turn at claude-haiku-4-5

# The queries, and which the hash of their text holds out (orchestrator/evals/triggers.py
# held_out: the first 8 bytes of SHA-256 under 0.4): fixed text, so a fixed split.
SHOULD = {"sum up my meeting notes from this morning": False,
          "give me the key points of these lecture notes": False,
          "make a short summary of the notes I took yesterday": False,
          "condense these notes into three bullet points": False,
          "what were the action items in my standup notes": True,
          "tl;dr of my reading notes, please": True,
          "boil my interview notes down to one paragraph": True}
SHOULD_NOT = {"book a meeting with Ana next Tuesday": False,
              "translate my notes into Spanish": False,
              "what is the weather in Lisbon": False,
              "file my taxi receipts as expenses": False,
              "review this pull request for bugs": True,
              "write a haiku about autumn": True,
              "email Bob that I will be late": True}


@pytest.fixture
def worker_env(llm: FakeLLM) -> dict[str, dict[str, str | None]]:
    return {AGENT_WORKER: {**llm.env(), "SKILLQ_AGENT_MODEL": "anthropic:claude-haiku-4-5"}}


def notes_vault(root: Path, k: str, description: str,
                queries: list[tuple[str, bool]]) -> str:
    """A vault of the skill under test and one other skill; its benchmarks.json holds
    only trigger queries."""
    name = f"summarize-notes-{k}"
    for folder, text, body in (
            (name, description, f"[[fake:describe-{k}]] Summarize the notes given."),
            (f"weather-{k}", "Tell the weather forecast for a city.", "Look it up.")):
        (root / folder).mkdir(parents=True)
        (root / folder / "SKILL.md").write_text(
            f"---\nname: {folder}\ndescription: {json.dumps(text)}\nversion: 1\n"
            f"approach: agent\n---\n\n{body}\n")
    (root / name / "benchmarks.json").write_text(json.dumps({
        "skill": name, "version": 1, "runs": [], "tests": [],
        "triggers": [{"query": q, "should_trigger": s} for q, s in queries]}))
    return name


def loads(skill: str, **extra: Any) -> list[dict[str, Any]]:
    """A router's turns that load ``skill`` (the tool's answer is its content), or none."""
    if not skill:
        return [{"output": {"skill": ""}, "usage": USAGE}]
    return [{"tool_calls": [{"name": "skill", "arguments": {"name": skill}}], "usage": USAGE},
            {"output": {"skill": skill}, "usage": USAGE, **extra}]


def triggers(stack: Stack, vault: Path, name: str, *options: str) -> dict[str, Any]:
    done = stack.cli("eval", name, "--triggers", "--json", "--vault", str(vault), *options,
                     cwd=vault.parent, timeout_s=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return dict(json.loads(done.stdout))


def by_query(scored: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {q["query"]: q for q in scored["queries"]}


def test_precision_and_recall_on_the_held_out_split(healthy: Stack, llm: FakeLLM,
                                                    tmp_path: Path) -> None:
    k = uuid.uuid4().hex[:6]
    vault = tmp_path / "vault"
    queries = [(q, True) for q in SHOULD] + [(q, False) for q in SHOULD_NOT]
    name = notes_vault(vault, k, f"[[fake:route-{k}]] Summarize notes into key points.",
                       queries)
    weather, content = f"weather-{k}", f'<skill_content name=\\"{name}\\">'
    router = {  # what the scripted router loads for each query, in the file's order
        # train: TP, TP, TP, FN (a decoy) | TN (a decoy), FP, TN (a vault skill), TN
        "sum up my meeting notes from this morning": name,
        "give me the key points of these lecture notes": name,
        "make a short summary of the notes I took yesterday": name,
        "condense these notes into three bullet points": "web-research",
        "book a meeting with Ana next Tuesday": "calendar-scheduler",
        "translate my notes into Spanish": name,
        "what is the weather in Lisbon": weather,
        "file my taxi receipts as expenses": "expense-report",
        # held out: TP, FN (none), FN (a decoy) | FP, TN (none), TN (a decoy)
        "what were the action items in my standup notes": name,
        "tl;dr of my reading notes, please": "",
        "boil my interview notes down to one paragraph": "web-research",
        "review this pull request for bugs": name,
        "write a haiku about autumn": "",
        "email Bob that I will be late": "email-drafter"}
    for query, _ in queries:
        loaded = router[query]
        llm.script(f"route-{k}", *loads(loaded, **(
            {"expect_tool_result": "<skill_content"} if loaded else {})))
    report = triggers(healthy, vault, name)
    current = report["current"]
    assert current["complete"] and report["stopped"] is None and report["improve"] is None
    # held out by the hash of each query's text: 3 of each kind
    assert {q: r["held_out"] for q, r in by_query(current).items()} == {**SHOULD, **SHOULD_NOT}
    # held out: TP 1, FP 1, FN 2, TN 2 -> precision 1/2, recall 1/3, F1 2/5
    held = current["held_out"]
    assert (held["tp"], held["fp"], held["fn"], held["tn"]) == (1, 1, 2, 2)
    assert held["precision"] == pytest.approx(1 / 2)
    assert held["recall"] == pytest.approx(1 / 3)
    assert held["f1"] == pytest.approx(2 / 5)
    # train: TP 3, FP 1, FN 1, TN 3 -> precision 3/4, recall 3/4
    train = current["train"]
    assert (train["tp"], train["fp"], train["fn"], train["tn"]) == (3, 1, 1, 3)
    assert (train["precision"], train["recall"]) == (pytest.approx(0.75), pytest.approx(0.75))
    for query, row in by_query(current).items():
        assert row["loaded"] == ([router[query]] if router[query] else [])
        assert row["triggered"] is (router[query] == name) and row["error"] is None
    assert report["spent_usd"] == pytest.approx(0.0004 * (14 + 12))  # 12 loaded a skill
    # the router saw the vault's skills, the decoys and the description; loaded from them
    first = json.dumps(llm.bodies(f"route-{k}")[0])
    for shown in (name, "Summarize notes into key points.", weather, "calendar-scheduler",
                  "web-research", "email-drafter"):
        assert shown in first
    assert any(content in json.dumps(b) for b in llm.bodies(f"route-{k}"))
    with healthy.db() as session:
        runs = session.query(PipelineRun).filter(
            PipelineRun.triggered_by == f"triggers:{name}").all()
        assert len(runs) == 14 and {(r.skill, r.source) for r in runs} == {
            ("skillq-route", "eval")}
    assert not list((healthy.home / "evals" / "catalogs").iterdir())  # cleaned up


def test_improve_writes_the_best_held_out_description_as_a_draft_only(
        healthy: Stack, llm: FakeLLM, tmp_path: Path) -> None:
    k = uuid.uuid4().hex[:6]
    vault = tmp_path / "vault"
    should, should_not = list(SHOULD), list(SHOULD_NOT)
    # train: should 0, 1 and should-not 0, 1; held out: should 4, 5 and should-not 4, 5
    queries = [(should[0], True), (should[1], True), (should[4], True), (should[5], True),
               (should_not[0], False), (should_not[1], False), (should_not[4], False),
               (should_not[5], False)]
    name = notes_vault(vault, k, f"[[fake:cur-{k}]] Summarize notes.", queries)
    published = healthy.cli("publish", name, "--vault", str(vault), cwd=tmp_path)
    assert published.returncode == 0, published.stdout + published.stderr
    skill_md = (vault / name / "SKILL.md").read_bytes()
    with healthy.db() as session:
        versions = [(v.version, v.folder_hash, v.skill_md)
                    for v in session.query(PublishedVersion).filter_by(skill=name)]
    assert [v[0] for v in versions] == [1]

    def route(key: str, *loaded: str) -> None:  # one per query, in the file's order
        for skill in loaded:
            llm.script(key, *loads(skill))

    # current: train TP, FN, TN, FP (the misses); held out TP, FN, FP, TN: F1 1/2
    route(f"cur-{k}", name, "", name, "", "", name, name, "")
    c1 = f"[[fake:c1-{k}]] Summarize notes, lecture notes and meeting notes."
    c2 = f"[[fake:c2-{k}]] Summarize any notes into key points or a short paragraph."
    too_long = "Summarize notes. " * 70
    llm.script(f"describe-{k}", {"output": {"descriptions": [c1, too_long, c2]},
                                 "usage": USAGE})
    # c1: train all right; held out TP, TP, FP, TN: F1 4/5
    route(f"c1-{k}", name, name, name, name, "", "", name, "")
    # c2: train TP, FN, TN, TN; held out TP, TP, TN, TN: F1 1, the best held out
    route(f"c2-{k}", name, "", name, name, "", "", "", "")
    report = triggers(healthy, vault, name, "--improve")
    found = report["improve"]
    assert report["current"]["held_out"]["f1"] == pytest.approx(0.5)
    first, second, third = found["candidates"]
    assert (first["description"], first["held_out"]["f1"]) == (c1, pytest.approx(0.8))
    assert first["train"]["f1"] == pytest.approx(1.0)
    assert second["rejected"].startswith(f"description is {len(too_long.strip())} characters, "
                                         "over the limit of 1024")
    assert "held_out" not in second
    assert (third["description"], third["held_out"]["f1"]) == (c2, pytest.approx(1.0))
    assert found["best"] == c2
    # the describer read the train queries the current description got wrong, and none
    # of the held-out ones
    (asked,) = llm.bodies(f"describe-{k}")
    given = json.loads(asked["messages"][0]["content"][0]["text"].split("as JSON:\n", 1)[1])
    assert given["misses"] == [
        {"query": should[1], "should_trigger": True, "loaded": []},
        {"query": should_not[1], "should_trigger": False, "loaded": [name]}]
    for held in (should[4], should[5], should_not[4], should_not[5]):
        assert held not in json.dumps(asked)
    # the draft: the skill's SKILL.md with c2 as its description, beside nothing of the vault
    draft = Path(found["draft"])
    assert draft.parent == healthy.home / "evals" / name
    lines = draft.read_text().splitlines()
    assert f"description: {json.dumps(c2)}" in lines
    original = skill_md.decode().splitlines()
    assert [x for x in lines if not x.startswith("description:")] == \
        [x for x in original if not x.startswith("description:")]
    # the vault's SKILL.md and the published version are as they were
    assert (vault / name / "SKILL.md").read_bytes() == skill_md
    assert sorted(p.name for p in (vault / name).iterdir()) == ["SKILL.md", "benchmarks.json"]
    with healthy.db() as session:
        after = [(v.version, v.folder_hash, v.skill_md)
                 for v in session.query(PublishedVersion).filter_by(skill=name)]
    assert after == versions
    assert not {key for key in llm.remaining() if key.endswith(k)}


def test_the_budget_stops_the_eval_and_no_triggers_is_refused(
        healthy: Stack, llm: FakeLLM, tmp_path: Path) -> None:
    k = uuid.uuid4().hex[:6]
    vault = tmp_path / "vault"
    queries = [(q, False) for q in SHOULD_NOT][:4]
    name = notes_vault(vault, k, f"[[fake:budget-{k}]] Summarize notes.", queries)
    llm.script(f"budget-{k}", *[t for _ in queries for t in loads("")])
    report = triggers(healthy, vault, name, "--budget-usd", "0.001")
    # $0.0004 a request: the third is sent while $0.0008 is spent, under $0.001; none after
    assert len(llm.requests(f"budget-{k}")) == 3
    assert report["stopped"] == "the budget of $0.001 was spent ($0.0012) after 3 runs"
    assert len(report["current"]["queries"]) == 3 and not report["current"]["complete"]
    bench = vault / name / "benchmarks.json"
    bench.write_text(json.dumps({**json.loads(bench.read_text()), "triggers": []}))
    done = healthy.cli("eval", name, "--triggers", "--vault", str(vault), cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"{name}/benchmarks.json: triggers: has no queries" in done.stderr
    assert "Traceback" not in done.stderr
