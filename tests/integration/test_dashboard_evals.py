"""A skill's evals on its dashboard page (orchestrator/dashboard/eval_views.py): the
latest `skillq eval` with its baseline, case by case, the assertions that never
discriminate, and the trend of the last evals' pass rates, against a real `skillq
dashboard` process over HTTP and the stack's real PostgreSQL.

The evals are recorded as `skillq eval` records them (lifecycle/eval_records.py), one
transaction each, so each has its own created_at. The skills are copies of the dashboard
vault's ``lone`` under names of this module's own: no other module's evals reach them.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import VAULTS, Stack, copy_vault
from support.dashboard_http import Client
from test_dashboard import Served, served_signed_in

from lifecycle.eval_records import record_eval

pytestmark = pytest.mark.integration

USER, PASSWORD = "ada", "ev4ls-pass"
KEY = uuid.uuid4().hex[:6]
EVALED, NEVER = f"evaled-{KEY}", f"unevaled-{KEY}"
STOPPED = "the budget of $0.05 was spent ($0.0512) after 9 of 10 runs"
FLAGGED = "the answer is <short> & polite"


def add_skill(vault: Path, name: str) -> None:
    """A copy of ``lone`` (a code leaf that echoes its text) named ``name``."""
    folder = copy_vault(vault / "lone", vault / name)
    manifest = folder / "SKILL.md"
    manifest.write_text(manifest.read_text().replace("name: lone", f"name: {name}", 1))


@pytest.fixture(scope="module")
def vault(tmp_path_factory: pytest.TempPathFactory) -> Path:
    copied = copy_vault(VAULTS / "dashboard", tmp_path_factory.mktemp("dash-evals") / "vault")
    for name in (EVALED, NEVER):
        add_skill(copied, name)
    return copied


@pytest.fixture(scope="module")
def served(stack: Stack, vault: Path) -> Iterator[Served]:
    with served_signed_in(stack, vault, USER, PASSWORD) as dashboard:
        yield dashboard


@pytest.fixture
def client(served: Served) -> Client:
    return Client(served.url, USER, PASSWORD)


def case(name: str, runs: int, passed: int, at: dict[str, float], hat: dict[str, float],
         cost: dict[str, float] | None = None) -> dict[str, Any]:
    return {"case": name, "runs": runs, "passed": passed, "pass_rate": passed / runs,
            "pass_at_k": at, "pass_hat_k": hat, "duration_ms": {"mean": 840.0, "stddev": 95.0},
            "tokens": None, "cost_usd": cost}


def record(stack: Stack, skill: str, *, subject: str, pass_rate: float,
           baseline: str | None = None, baseline_pass_rate: float | None = None,
           spent_usd: float = 0.01, stopped: str | None = None,
           extra: dict[str, Any] | None = None) -> str:
    """One eval recorded in a transaction of its own: its id."""
    eval_id = str(uuid.uuid4())
    report = {"skill": skill, "version": int(subject.removeprefix("v")), "subject": subject,
              "baseline": baseline, "k": [1],
              "cases": [case("holds", 5, round(pass_rate * 5), {"1": pass_rate},
                             {"1": pass_rate})],
              "non_discriminating": [], "spent_usd": spent_usd, "judge_usd": 0.0,
              "stopped": stopped, **(extra or {})}
    with stack.db() as session:
        record_eval(session, eval_id=eval_id, skill=skill, subject=subject, baseline=baseline,
                    runs_per_case=5, pass_rate=pass_rate,
                    baseline_pass_rate=baseline_pass_rate, spent_usd=spent_usd,
                    stopped=stopped, report=report, results=[])
    return eval_id


def page_of(client: Client, skill: str) -> str:
    reply = client.get(f"/skills/{skill}")
    assert reply.status == 200, reply.text[:3000]
    return reply.text


def cell(page: str, element_id: str) -> str:
    """The text inside the element with ``id`` (tags dropped, whitespace folded)."""
    found = re.search(rf'<(\w+)[^>]* id="{element_id}"[^>]*>(.*?)</\1>', page, re.S)
    assert found, (element_id, page[:5000])
    return " ".join(re.sub(r"<[^>]+>", " ", found[2]).split())


def cells(row: str, css_class: str) -> list[str]:
    return [" ".join(re.sub(r"<[^>]+>", " ", t).split())
            for t in re.findall(rf'<td class="{css_class}">(.*?)</td>', row, re.S)]


def test_the_latest_eval_its_baseline_and_the_trend_are_shown(
        stack: Stack, client: Client) -> None:
    first = record(stack, EVALED, subject="v1", pass_rate=0.4)
    second = record(stack, EVALED, subject="v1", pass_rate=0.6)
    latest = record(
        stack, EVALED, subject="v2", pass_rate=0.8, baseline="v1", baseline_pass_rate=0.4,
        spent_usd=0.0512, stopped=STOPPED, extra={
            "k": [1, 3],
            "cases": [case("holds", 5, 4, {"1": 0.8, "3": 1.0}, {"1": 0.8, "3": 0.4},
                           {"mean": 0.0012, "stddev": 0.0003})],
            "baseline_cases": [case("holds", 5, 2, {"1": 0.4, "3": 0.9}, {"1": 0.4, "3": 0.0})],
            "differences": [{"case": "holds",
                             "pass_rate": {"estimate": 0.4, "low": -0.12, "high": 0.72},
                             "cost_usd": None, "duration_ms": None}],
            "non_discriminating": [{"case": "holds", "assertion": FLAGGED}]})
    page = page_of(client, EVALED)

    # the latest eval: when, subject against baseline, pass rates, spent, why it stopped
    assert f'id="latest-eval" data-eval="{latest}"' in page
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", cell(page, "eval-when"))
    assert cell(page, "eval-subject") == "v2"
    assert cell(page, "eval-baseline") == "v1"
    assert (cell(page, "eval-pass-rate"), cell(page, "eval-baseline-pass-rate")) == ("80%", "40%")
    assert cell(page, "eval-spent").startswith("$0.0512")
    assert cell(page, "eval-stopped") == f"stopped: {STOPPED}"

    # its case: runs, passes, pass@k and pass^k for k = 1, 3, cost, against the baseline
    found = re.search(r'<tr class="eval-case" data-case="holds">.*?</tr>', page, re.S)
    assert found, page[:5000]
    row = found[0]
    assert cells(row, "pass-rate") == ["80%"]
    assert (cells(row, "pass-at"), cells(row, "pass-hat")) == (["0.80", "1.00"], ["0.80", "0.40"])
    assert "$0.0012 ± $0.0003" in row
    assert cells(row, "baseline-rate") == ["40%"]
    assert cells(row, "difference") == ["+40 pts [-12, +72]"]
    for header in ("pass@1", "pass@3", "pass^1", "pass^3"):
        assert f"<th>{header}</th>" in page, header

    # the assertion that never discriminates, flagged (and escaped, as all the report is)
    flagged = cell(page, "non-discriminating")
    assert "never discriminates" in flagged
    assert "the answer is &lt;short&gt; &amp; polite" in flagged
    assert FLAGGED not in page
    assert "flag" in row and "never discriminates" in row

    # the trend: the three evals, oldest to newest, each with its subject
    trend = page[page.index('id="eval-trend"'):]
    assert re.findall(r'class="trend-point" data-eval="([^"]+)"', trend) == [
        first, second, latest]
    assert re.findall(r'<b class="trend-rate">([^<]*)</b>', trend) == ["40%", "60%", "80%"]
    assert re.findall(r'<span class="trend-subject">([^<]*)</span>', trend) == [
        "v1", "v1", "v2"]
    spark = page[page.index('id="eval-spark"'):page.index("</svg>", page.index('id="eval-spark"'))]
    heights = [float(y) for y in re.findall(r'<circle class="dot[^"]*" cx="[^"]+" cy="([^"]+)"',
                                            spark)]
    assert len(heights) == 3 and heights[0] > heights[1] > heights[2]  # rising: y points down
    assert "no-eval" not in page


def test_a_skill_never_evaluated_names_the_command(client: Client) -> None:
    page = page_of(client, NEVER)
    assert cell(page, "no-eval").startswith("never evaluated:")
    assert f"<code>skillq eval {NEVER}</code>" in page
    assert 'id="latest-eval"' not in page and 'id="eval-trend"' not in page
