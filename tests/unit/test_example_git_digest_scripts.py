"""The git-digest example vault's leaf scripts, run for real through the script protocol.

Each script runs as a worker would run it: in a scratch copy of its skill folder, with
a scrubbed environment (PATH, HOME, LANG, SKILL_INPUTS, SKILL_OUTPUT), the inputs both
in the SKILL_INPUTS file and on stdin, its own process group and a timeout. The git
repositories are created here with fixed author and committer dates.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

VAULT = Path(__file__).resolve().parents[2] / "examples" / "git-digest"
LEAVES = ("git-recent-commits", "commit-stats", "svg-bar-chart", "markdown-report")
SVG = "{http://www.w3.org/2000/svg}"
ALL_TIME = 36500  # days: the fixture commits are from 2024
BENCH_DIR = "/tmp/skillq-benchmarks"  # where benchmarks write; redirected into tmp_path


@dataclass
class Run:
    code: int
    outputs: dict[str, Any]
    stderr: str
    seconds: float


def manifest(skill: str) -> dict[str, Any]:
    _, front, _ = (VAULT / skill / "SKILL.md").read_text(encoding="utf-8").split("---\n", 2)
    return yaml.safe_load(front)


def run_skill(skill: str, inputs: dict[str, Any], scratch: Path, **env: str) -> Run:
    """Run one leaf skill exactly per the script protocol; check outputs against the manifest."""
    spec = manifest(skill)
    payload = json.dumps({i["name"]: i["default"] for i in spec["inputs"] if "default" in i}
                         | inputs)  # the worker applies defaults before the script runs
    work = Path(tempfile.mkdtemp(dir=scratch))
    folder = shutil.copytree(VAULT / skill, work / skill)
    (work / "inputs.json").write_text(payload, encoding="utf-8")
    clean = {k: os.environ[k] for k in ("PATH", "HOME", "LANG") if k in os.environ}
    # `python3` resolves on PATH as on a worker, whose PATH starts with its own Python's
    # bin: the same here, which also skips slow version-manager shims.
    clean["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), clean.get("PATH", "")])
    clean |= {"SKILL_INPUTS": str(work / "inputs.json"), "SKILL_OUTPUT": str(work / "out.json")}
    start = time.monotonic()
    proc = subprocess.run(shlex.split(spec["run"]["command"]), cwd=folder, env=clean | env,
                          input=payload, capture_output=True, text=True, timeout=30,
                          start_new_session=True)
    outputs: dict[str, Any] = {}
    if proc.returncode == 0:
        outputs = json.loads((work / "out.json").read_text(encoding="utf-8"))
        assert set(outputs) == {o["name"] for o in spec["outputs"]}, proc.stderr
    return Run(proc.returncode, outputs, proc.stderr, time.monotonic() - start)


def git(repo: Path, *args: str, when: str = "2024-03-01T00:00:00+00:00",
        who: tuple[str, str] = ("Nobody", "nobody@example.com")) -> None:
    env = {"PATH": os.environ["PATH"], "HOME": str(repo), "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_CONFIG_GLOBAL": os.devnull, "GIT_AUTHOR_NAME": who[0], "GIT_AUTHOR_EMAIL": who[1],
           "GIT_COMMITTER_NAME": who[0], "GIT_COMMITTER_EMAIL": who[1],
           "GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when}
    subprocess.run(["git", "-C", str(repo), *args], env=env, check=True, capture_output=True)


def commit(repo: Path, when: str, who: tuple[str, str], message: str,
           files: dict[str, str | bytes | None]) -> None:
    for name, content in files.items():
        path = repo / name
        if content is None:
            path.unlink()
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message, when=when, who=who)


def new_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    return path


ADA, ADA2 = ("Ada Lovelace", "ada@example.com"), ("Ada King", "ADA@Example.com")
GRACE = ("Grace Hopper", "grace@example.com")


@pytest.fixture(scope="module")
def repos(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("repos")
    alpha = new_repo(root / "alpha")
    commit(alpha, "2024-03-04T09:00:00+00:00", ADA, "Add README", {"README.md": "a\nb\nc\n"})
    commit(alpha, "2024-03-05T10:00:00+00:00", GRACE, "Add app",
           {"README.md": "a\nB\nc\n", "src/app.py": "1\n2\n3\n4\n5\n"})  # +6 -1, 2 files
    commit(alpha, "2024-03-05T15:00:00+00:00", ADA2, "Logo | trim app",
           {"logo.png": b"\x89PNG\x00\x01\x02", "src/app.py": "1\n2\n3\n"})  # +0 -2, 2 files
    beta = new_repo(root / "beta")
    commit(beta, "2024-03-06T12:00:00+00:00", GRACE, "Notes", {"notes.txt": "x\n" * 10})
    return {"alpha": alpha, "beta": beta, "empty": new_repo(root / "empty"), "root": root}


def test_recent_commits_reads_history_and_numstat(repos: dict[str, Path], tmp_path: Path) -> None:
    run = run_skill("git-recent-commits", {"repo_path": str(repos["alpha"]),
                                           "since_days": ALL_TIME}, tmp_path)
    assert run.code == 0, run.stderr
    assert run.outputs["repo"] == "alpha"
    assert Path(run.outputs["path"]) == repos["alpha"].resolve()
    commits = run.outputs["commits"]
    assert [c["subject"] for c in commits] == ["Logo | trim app", "Add app", "Add README"]
    assert [(c["insertions"], c["deletions"], c["files_changed"]) for c in commits] == [
        (0, 2, 2), (6, 1, 2), (3, 0, 1)]  # the binary logo counts as a file, not as lines
    assert commits[0]["author"] == "Ada King" and commits[0]["email"] == "ADA@Example.com"
    assert commits[0]["date"] == "2024-03-05T15:00:00+00:00"
    assert all(len(c["sha"]) == 40 for c in commits)
    assert run.seconds < 2


def test_recent_commits_window_limit_subfolder_and_empty_repo(
        repos: dict[str, Path], tmp_path: Path) -> None:
    limited = run_skill("git-recent-commits", {"repo_path": str(repos["alpha"] / "src"),
                                               "since_days": ALL_TIME, "max_commits": 2}, tmp_path)
    assert limited.code == 0 and limited.outputs["repo"] == "alpha"  # a sub-folder works
    assert len(limited.outputs["commits"]) == 2 and "max_commits=2" in limited.stderr
    recent = run_skill("git-recent-commits", {"repo_path": str(repos["alpha"]),
                                              "since_days": 30}, tmp_path)
    assert recent.code == 0 and recent.outputs["commits"] == []  # 2024 is outside 30 days
    relative = run_skill("git-recent-commits", {"repo_path": "beta", "since_days": ALL_TIME},
                         tmp_path, SKILLQ_WORKDIR=str(repos["root"]))
    assert relative.code == 0 and len(relative.outputs["commits"]) == 1
    empty = run_skill("git-recent-commits", {"repo_path": str(repos["empty"])}, tmp_path)
    assert empty.code == 0 and empty.outputs["commits"] == []


def test_recent_commits_failures_name_the_path(tmp_path: Path) -> None:
    plain = tmp_path / "not a repo"
    plain.mkdir()
    for path in (plain, Path("/nonexistent-repo")):
        run = run_skill("git-recent-commits", {"repo_path": str(path)}, tmp_path)
        assert run.code == 1 and str(path) in run.stderr
    bad = run_skill("git-recent-commits", {"repo_path": str(plain), "since_days": 0}, tmp_path)
    assert bad.code == 1 and "since_days" in bad.stderr


def test_recent_commits_locked_repository_is_transient(repos: dict[str, Path],
                                                       tmp_path: Path) -> None:
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "git").write_text("#!/bin/sh\necho \"fatal: Unable to create '$2/.git/index.lock':"
                              " File exists.\" >&2\nexit 128\n")
    (fake / "git").chmod(0o755)
    run = run_skill("git-recent-commits", {"repo_path": str(repos["alpha"])}, tmp_path,
                    PATH=f"{fake}{os.pathsep}{os.environ['PATH']}")
    assert run.code == 75 and "index.lock" in run.stderr


def collect(repos: dict[str, Path], tmp_path: Path, names: list[str]) -> list[dict[str, Any]]:
    """The `commits` step by hand: one run per item, failed items skipped (on_failure: skip)."""
    runs = [run_skill("git-recent-commits", {"repo_path": str(repos["root"] / n),
                                             "since_days": ALL_TIME}, tmp_path) for n in names]
    return [r.outputs for r in runs if r.code == 0]


def test_commit_stats_aggregates_two_repositories(repos: dict[str, Path], tmp_path: Path) -> None:
    run = run_skill("commit-stats", {"repos": collect(repos, tmp_path, ["alpha", "beta"])},
                    tmp_path)
    assert run.code == 0, run.stderr
    out = run.outputs
    assert out["totals"] == {"commits": 4, "authors": 2, "insertions": 19, "deletions": 3,
                             "repos": 2}
    assert out["repo_names"] == ["alpha", "beta"] and out["commit_counts"] == [3, 1]
    assert out["per_repo"][0] == {"repo": "alpha", "commits": 3, "authors": 2, "insertions": 9,
                                  "deletions": 3, "busiest_day": "2024-03-05"}
    assert out["by_day"] == {"2024-03-04": 1, "2024-03-05": 2, "2024-03-06": 1}
    # Ada's two spellings are one person, shown under the newest name; ties go by insertions.
    assert out["top_authors"] == [
        {"author": "Grace Hopper", "commits": 2, "insertions": 16, "deletions": 1},
        {"author": "Ada King", "commits": 2, "insertions": 3, "deletions": 2}]


def test_commit_stats_duplicates_labels_and_bad_input(tmp_path: Path) -> None:
    def item(path: str) -> dict[str, Any]:
        return {"repo": "app", "path": path, "commits": []}
    run = run_skill("commit-stats", {"repos": [item("/c/app"), item("/s/app"), item("/c/app")]},
                    tmp_path)
    assert run.code == 0 and run.outputs["repo_names"] == ["c/app", "s/app"]
    assert run.outputs["per_repo"][0]["busiest_day"] is None and "twice" in run.stderr
    bad = run_skill("commit-stats", {"repos": [{"repo": "x", "commits": [{"date": "soon"}]}]},
                    tmp_path)
    assert bad.code == 1 and "repos[0].commits[0].date" in bad.stderr


def test_svg_bar_chart_draws_one_rect_per_bar(tmp_path: Path) -> None:
    run = run_skill("svg-bar-chart", {"title": "A <b> & \"c\"", "labels": ["x&y", "b", "c"],
                                      "values": [12, 3.5, 0]}, tmp_path)
    assert run.code == 0, run.stderr
    root = ET.fromstring(run.outputs["svg"])
    assert root.tag == f"{SVG}svg" and len(root.findall(f"{SVG}rect")) == 3
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert 'A <b> & "c"' in texts and "x&y" in texts and "12" in texts and "3.5" in texts
    empty = run_skill("svg-bar-chart", {"title": "t", "labels": [], "values": []}, tmp_path)
    empty_root = ET.fromstring(empty.outputs["svg"])
    assert not empty_root.findall(f"{SVG}rect") and "no data" in empty.outputs["svg"]
    bad = run_skill("svg-bar-chart", {"title": "t", "labels": ["a", "b"], "values": [1]}, tmp_path)
    assert bad.code == 1 and "labels has 2 items but values has 1" in bad.stderr


def test_markdown_report_writes_files_relative_to_workdir(tmp_path: Path) -> None:
    inputs = {"title": "Week 10", "since_days": 7, "chart_svg": '<svg xmlns="http://www.w3.org/2000/svg"/>',
              "totals": {"commits": 1, "authors": 1, "insertions": 5, "deletions": 2, "repos": 1},
              "per_repo": [{"repo": "a|b", "commits": 1, "authors": 1, "insertions": 5,
                            "deletions": 2, "busiest_day": "2024-03-05"}],
              "top_authors": [], "output_dir": "out/nested"}
    run = run_skill("markdown-report", inputs, tmp_path, SKILLQ_WORKDIR=str(tmp_path))
    assert run.code == 0, run.stderr
    report = tmp_path / "out" / "nested" / "digest.md"
    assert run.outputs["report_path"] == str(report)
    assert report.read_text(encoding="utf-8") == run.outputs["markdown"]
    assert (report.parent / "commits.svg").is_file()
    md = run.outputs["markdown"]
    assert md.startswith("# Week 10\n") and "Commits from the last 7 days" in md
    assert "| a\\|b | 1 | 1 | +5 | -2 | 2024-03-05 |" in md and "Nobody committed" in md
    bad = run_skill("markdown-report", inputs | {"chart_svg": "<html/>"}, tmp_path)
    assert bad.code == 1 and "chart_svg" in bad.stderr


def test_end_to_end_digest_of_two_repositories(repos: dict[str, Path], tmp_path: Path) -> None:
    # The git-digest orchestrator's four steps, by hand; the missing repo is skipped.
    commits = collect(repos, tmp_path, ["alpha", "no-such-repo", "beta"])
    stats = run_skill("commit-stats", {"repos": commits}, tmp_path).outputs
    chart = run_skill("svg-bar-chart", {"title": "Commits per repository",
                                        "labels": stats["repo_names"],
                                        "values": stats["commit_counts"]}, tmp_path).outputs
    report = run_skill("markdown-report", {
        "title": "Git digest", "since_days": ALL_TIME, "totals": stats["totals"],
        "per_repo": stats["per_repo"], "top_authors": stats["top_authors"],
        "chart_svg": chart["svg"], "output_dir": str(tmp_path / "digest")}, tmp_path)
    assert report.code == 0, report.stderr
    md = Path(report.outputs["report_path"]).read_text(encoding="utf-8")
    for line in ("## Summary", "## Repositories", "## Top authors",
                 "- **4** commits by **2** authors in **2** repositories",
                 "- **+19** / **-3** lines changed", "![Commits per repository](commits.svg)",
                 "| alpha | 3 | 2 | +9 | -3 | 2024-03-05 |",
                 "| beta | 1 | 1 | +10 | -0 | 2024-03-06 |",
                 "| Grace Hopper | 2 | +16 | -1 |"):
        assert line in md
    svg = ET.parse(tmp_path / "digest" / "commits.svg").getroot()
    assert len(svg.findall(f"{SVG}rect")) == 2


def benchmark_cases() -> list[Any]:
    cases = []
    for skill in LEAVES:
        bench = json.loads((VAULT / skill / "benchmarks.json").read_text(encoding="utf-8"))
        assert bench["skill"] == skill and bench["runs"] == []
        cases += [pytest.param(skill, t, id=f"{skill}/{t['id']}") for t in bench["tests"]]
    return cases


@pytest.mark.parametrize(("skill", "test"), benchmark_cases())
def test_leaf_benchmarks_pass_offline(skill: str, test: dict[str, Any], tmp_path: Path) -> None:
    # Benchmarks write under /tmp/skillq-benchmarks; keep this run inside tmp_path.
    def here(text: str) -> Any:
        return json.loads(text.replace(BENCH_DIR, str(tmp_path / "bench")))
    inputs, expected = here(json.dumps(test["inputs"])), here(json.dumps(test["expected"]))
    run = run_skill(skill, inputs, tmp_path)
    assert (run.code == 0) is expected["success"], run.stderr
    assert run.code in (0, 1) and run.seconds * 1000 < expected["max_duration_ms"]
    assert expected.get("error_contains", "") in run.stderr
    text = json.dumps(run.outputs)
    assert all(s in text for s in expected.get("output_contains", []))
    for name in set(expected) & set(run.outputs):
        assert run.outputs[name] == expected[name], name
