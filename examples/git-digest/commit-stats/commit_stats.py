"""commit-stats: aggregate git-recent-commits outputs into digest statistics.

Script protocol: inputs JSON from the file named by SKILL_INPUTS (else stdin), outputs
JSON to the file named by SKILL_OUTPUT (else the last stdout line). Exit 0 = success,
1 = permanent failure (malformed input). Pure and deterministic: no clock, no I/O
beyond the protocol files, so the worker may cache it.
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from datetime import date
from typing import NoReturn

TOP_AUTHORS = 10


def fail(message: str, code: int = 1) -> NoReturn:
    print(f"commit-stats: {message}", file=sys.stderr)
    sys.exit(code)


def load_inputs() -> dict:
    path = os.environ.get("SKILL_INPUTS")
    try:
        if path:
            with open(path, encoding="utf-8") as fh:
                data = json.load(fh)
        else:
            data = json.load(sys.stdin)
    except (OSError, ValueError) as exc:
        fail(f"cannot read the inputs JSON: {exc}")
    if not isinstance(data, dict):
        fail("the inputs JSON must be an object")
    return data


def emit(outputs: dict) -> None:
    text = json.dumps(outputs, ensure_ascii=False)
    target = os.environ.get("SKILL_OUTPUT")
    if target:
        with open(target, "w", encoding="utf-8") as fh:
            fh.write(text)
    else:
        print(text)


def count(commit: dict, field: str, where: str) -> int:
    value = commit.get(field, 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        fail(f"{where}.{field} must be a non-negative integer, got {value!r}")
    return value


def day_of(commit: dict, where: str) -> str:
    # The calendar day in the author's own timezone, as written in the ISO date: the
    # day the author saw, and no clock or timezone database needed.
    raw = commit.get("date")
    try:
        return date.fromisoformat(str(raw)[:10]).isoformat()
    except ValueError:
        fail(f"{where}.date must be an ISO-8601 date, got {raw!r}")


def check_repos(repos: object) -> list[dict]:
    if not isinstance(repos, list):
        fail("repos must be a list of git-recent-commits outputs ({repo, path, commits})")
    seen: set[str] = set()
    kept = []
    for i, item in enumerate(repos):
        if not isinstance(item, dict) or not isinstance(item.get("repo"), str):
            fail(f"repos[{i}] must be an object with a string `repo`")
        if not isinstance(item.get("commits"), list):
            fail(f"repos[{i}] ({item['repo']}) must have a list `commits`")
        path = item.get("path")
        if path and path in seen:
            # The same repository given twice (e.g. "~/x" and "/home/me/x"): count it once.
            print(f"commit-stats: {path} is listed twice; counted once", file=sys.stderr)
            continue
        if path:
            seen.add(str(path))
        kept.append(item)
    return kept


def labels_for(repos: list[dict]) -> list[str]:
    # Folder names label the chart; two repos both called "app" become "a/app", "b/app".
    names = Counter(r["repo"] for r in repos)
    labels = []
    for r in repos:
        parent = os.path.basename(os.path.dirname(str(r.get("path") or "")))
        labels.append(f"{parent}/{r['repo']}" if names[r["repo"]] > 1 and parent else r["repo"])
    return labels


def main() -> None:
    repos = check_repos(load_inputs().get("repos"))
    per_repo = []
    by_day: Counter[str] = Counter()
    # Authors are people, identified by email (case-insensitive) when there is one, so a
    # renamed git config still counts as one person; shown under the newest name seen.
    names: dict[str, str] = {}
    authors: dict[str, Counter[str]] = {}

    for i, (repo, label) in enumerate(zip(repos, labels_for(repos), strict=True)):
        repo_days: Counter[str] = Counter()
        repo_people: set[str] = set()
        ins = dels = 0
        for j, commit in enumerate(repo["commits"]):
            where = f"repos[{i}].commits[{j}]"
            if not isinstance(commit, dict):
                fail(f"{where} must be an object")
            c_ins, c_dels = count(commit, "insertions", where), count(commit, "deletions", where)
            day = day_of(commit, where)
            name = str(commit.get("author") or "unknown")
            key = str(commit.get("email") or "").strip().lower() or name
            names.setdefault(key, name)  # commits arrive newest first
            person = authors.setdefault(key, Counter())
            person.update(commits=1, insertions=c_ins, deletions=c_dels)
            repo_people.add(key)
            repo_days[day] += 1
            ins, dels = ins + c_ins, dels + c_dels
        by_day.update(repo_days)
        busiest = max(repo_days.items(), key=lambda kv: (kv[1], kv[0]))[0] if repo_days else None
        per_repo.append(
            {
                "repo": label,
                "commits": len(repo["commits"]),
                "authors": len(repo_people),
                "insertions": ins,
                "deletions": dels,
                "busiest_day": busiest,
            }
        )

    ranked = sorted(
        authors.items(),
        key=lambda kv: (-kv[1]["commits"], -kv[1]["insertions"], names[kv[0]].lower()),
    )
    top_authors = [
        {
            "author": names[key],
            "commits": stats["commits"],
            "insertions": stats["insertions"],
            "deletions": stats["deletions"],
        }
        for key, stats in ranked[:TOP_AUTHORS]
    ]
    totals = {
        "commits": sum(r["commits"] for r in per_repo),
        "authors": len(authors),
        "insertions": sum(r["insertions"] for r in per_repo),
        "deletions": sum(r["deletions"] for r in per_repo),
        "repos": len(per_repo),
    }
    emit(
        {
            "totals": totals,
            "per_repo": per_repo,
            "top_authors": top_authors,
            "repo_names": [r["repo"] for r in per_repo],
            "commit_counts": [r["commits"] for r in per_repo],
            "by_day": dict(sorted(by_day.items())),
        }
    )


if __name__ == "__main__":
    main()
