"""markdown-report: write the git digest as <output_dir>/digest.md (+ commits.svg).

Script protocol: inputs JSON from the file named by SKILL_INPUTS (else stdin), outputs
JSON to the file named by SKILL_OUTPUT (else the last stdout line). Exit 0 = success,
75 = transient (disk full, device busy: the worker retries), 1 = permanent failure
(bad input, directory not writable). Standard library only.
"""

from __future__ import annotations

import errno
import json
import os
import re
import sys
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from typing import NoReturn

EX_TEMPFAIL = 75
TRANSIENT_ERRNOS = {errno.ENOSPC, errno.EAGAIN, errno.EBUSY, errno.EINTR, errno.ETIMEDOUT}
REPORT_NAME, CHART_NAME = "digest.md", "commits.svg"
MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|#])")


def fail(message: str, code: int = 1) -> NoReturn:
    print(f"markdown-report: {message}", file=sys.stderr)
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


def resolve_dir(raw: str) -> str:
    # The script runs in a scratch copy of the skill folder that the worker deletes, so
    # a relative output_dir means "relative to the caller": SKILLQ_WORKDIR when the
    # worker sets it, else the process's cwd.
    path = os.path.expanduser(raw.strip())
    if not os.path.isabs(path):
        path = os.path.join(os.environ.get("SKILLQ_WORKDIR") or os.getcwd(), path)
    return os.path.normpath(path)


def md(text: object) -> str:
    # Names and repo labels are user data: one line, and no accidental Markdown
    # (a `|` would split a table cell, `_` would start emphasis).
    return MD_SPECIAL.sub(r"\\\1", " ".join(str(text).split()))


def num(value: object) -> str:
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else "0"


def plural(n: int, word: str, many: str | None = None) -> str:
    return f"**{n:,}** {word if n == 1 else many or word + 's'}"


def rows_of(inputs: dict, name: str) -> list[dict]:
    rows = inputs.get(name) or []
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        fail(f"{name} must be a list of objects (as commit-stats outputs it)")
    return rows


def render(inputs: dict, has_chart: bool) -> str:
    title = inputs.get("title") or "Git digest"
    days = inputs.get("since_days", 7)
    totals = inputs.get("totals")
    if not isinstance(totals, dict):
        fail("totals must be an object (commit-stats' `totals` output)")
    if isinstance(days, bool) or not isinstance(days, int) or days < 1:
        fail(f"since_days must be a positive integer, got {days!r}")
    per_repo, top_authors = rows_of(inputs, "per_repo"), rows_of(inputs, "top_authors")
    t = {k: totals.get(k) for k in ("commits", "authors", "insertions", "deletions", "repos")}
    t = {k: v if isinstance(v, int) and not isinstance(v, bool) else 0 for k, v in t.items()}
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M")
    lines = [
        f"# {md(title)}",
        "",
        f"Commits from the last {days} day{'s' if days != 1 else ''}, generated {now} UTC.",
        "",
        "## Summary",
        "",
        f"- {plural(t['commits'], 'commit')} by {plural(t['authors'], 'author')} "
        f"in {plural(t['repos'], 'repository', 'repositories')}",
        f"- **+{num(t['insertions'])}** / **-{num(t['deletions'])}** lines changed",
        "",
    ]
    if t["commits"] == 0:
        lines += ["No commits in this window.", ""]
    if has_chart:
        lines += [f"![Commits per repository]({CHART_NAME})", ""]
    lines += ["## Repositories", ""]
    if per_repo:
        lines += ["| Repository | Commits | Authors | Insertions | Deletions | Busiest day |",
                  "| --- | ---: | ---: | ---: | ---: | --- |"]
    else:
        lines.append("No repository could be read.")
    for r in per_repo:
        lines.append(
            f"| {md(r.get('repo', '?'))} | {num(r.get('commits'))} | {num(r.get('authors'))} "
            f"| +{num(r.get('insertions'))} | -{num(r.get('deletions'))} "
            f"| {md(r.get('busiest_day') or '-')} |"
        )
    lines += ["", "## Top authors", ""]
    if top_authors:
        lines += ["| Author | Commits | Insertions | Deletions |", "| --- | ---: | ---: | ---: |"]
        lines += [
            f"| {md(a.get('author', '?'))} | {num(a.get('commits'))} "
            f"| +{num(a.get('insertions'))} | -{num(a.get('deletions'))} |"
            for a in top_authors
        ]
    else:
        lines.append("Nobody committed in this window.")
    return "\n".join(lines) + "\n"


def check_svg(svg: str) -> None:
    # Refuse a DOCTYPE outright: a chart never needs one, and it is how XML entity
    # bombs get in. Then make sure it really is an <svg> document before saving it.
    if "<!DOCTYPE" in svg.upper():
        fail("chart_svg must not contain a DOCTYPE")
    try:
        root = ET.fromstring(svg)  # noqa: S314 (DOCTYPE refused above: no entities)
    except ET.ParseError as exc:
        fail(f"chart_svg is not well-formed XML: {exc}")
    if root.tag.rsplit("}", 1)[-1] != "svg":
        fail(f"chart_svg must be an <svg> document, its root is <{root.tag}>")


def write_atomic(path: str, text: str) -> None:
    # Write then rename, so a reader (or a retry) never sees half a report.
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8", newline="\n") as fh:
        fh.write(text)
    os.replace(tmp, path)


def main() -> None:
    inputs = load_inputs()
    raw_dir = inputs.get("output_dir")
    if not isinstance(raw_dir, str) or not raw_dir.strip():
        fail("output_dir is required: the directory to write digest.md into")
    svg = inputs.get("chart_svg") or ""
    if not isinstance(svg, str):
        fail("chart_svg must be a string")
    if svg:
        check_svg(svg)
    markdown = render(inputs, has_chart=bool(svg))
    out_dir = resolve_dir(raw_dir)
    report_path = os.path.join(out_dir, REPORT_NAME)
    try:
        os.makedirs(out_dir, exist_ok=True)
        if svg:
            write_atomic(os.path.join(out_dir, CHART_NAME), svg + "\n")
        write_atomic(report_path, markdown)
    except OSError as exc:
        code = EX_TEMPFAIL if exc.errno in TRANSIENT_ERRNOS else 1
        fail(f"cannot write the report in {out_dir}: {exc.strerror or exc}", code)
    emit({"report_path": report_path, "markdown": markdown})


if __name__ == "__main__":
    main()
