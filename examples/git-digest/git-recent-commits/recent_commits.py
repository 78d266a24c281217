"""git-recent-commits: list a local repository's recent commits with line counts.

Script protocol: inputs JSON from the file named by SKILL_INPUTS (else stdin), outputs
JSON to the file named by SKILL_OUTPUT (else the last stdout line). Exit 0 = success,
75 = transient (git busy or slow: the worker retries), 1 = permanent (bad input, not a
repository). Standard library only, plus the `git` command.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from typing import NoReturn

EX_TEMPFAIL = 75
GIT_TIMEOUT = 45  # seconds; below run.timeout (60) so we can still say what happened
# One record per commit: RS, then the header fields separated by US. Subjects are
# single-line (%s), so a newline ends the header and the --numstat lines follow it.
LOG_FORMAT = "%x1e%H%x1f%an%x1f%ae%x1f%aI%x1f%s"
# git's wording for "someone else holds the repository right now": worth a retry.
TRANSIENT_MARKERS = ("index.lock", "unable to create", "cannot lock", "another git process",
                     "resource temporarily unavailable", "stale file handle")
# Variables that would silently point git at some other repository than repo_path.
REDIRECTING_VARS = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR")
RECORD_START = re.compile("[0-9a-f]{40,64}\x1f")  # a SHA-1 or SHA-256 id, then a field


def fail(message: str, code: int = 1) -> NoReturn:
    print(f"git-recent-commits: {message}", file=sys.stderr)
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


def int_input(inputs: dict, name: str, default: int, low: int, high: int) -> int:
    value = inputs.get(name, default)
    if value is None:
        value = default
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # some JSON producers write 7.0 for 7
    if isinstance(value, bool) or not isinstance(value, int):
        fail(f"{name} must be an integer, got {value!r}")
    if not low <= value <= high:
        fail(f"{name} must be between {low} and {high}, got {value}")
    return value


def resolve_path(raw: str) -> str:
    # The script runs inside a scratch copy of the skill folder, so a relative path is
    # taken relative to the caller's working directory (SKILLQ_WORKDIR) when known.
    path = os.path.expanduser(raw.strip())
    if not os.path.isabs(path):
        path = os.path.join(os.environ.get("SKILLQ_WORKDIR") or os.getcwd(), path)
    return os.path.normpath(path)


def window_start(since_days: int) -> str:
    # An absolute UTC timestamp, not "N days ago": git's approxidate silently matches
    # nothing for dates before the epoch (e.g. "36500 days ago"), so clamp to 1970-01-02.
    start = datetime.now(UTC) - timedelta(days=since_days)
    start = max(start, datetime(1970, 1, 2, tzinfo=UTC))
    return start.strftime("%Y-%m-%dT%H:%M:%S+00:00")


def run_git(repo: str, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in REDIRECTING_VARS}
    # English messages (we match on them), never prompt, never take optional locks.
    env.update(LC_ALL="C", GIT_TERMINAL_PROMPT="0", GIT_OPTIONAL_LOCKS="0")
    argv = ["git", "-C", repo, "-c", "log.showSignature=false", *args]
    try:
        return subprocess.run(
            argv, env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=GIT_TIMEOUT
        )
    except FileNotFoundError:
        fail("the `git` command is not installed or not on PATH")
    except subprocess.TimeoutExpired:
        fail(f"git {args[0]} took more than {GIT_TIMEOUT}s in {repo}; try again", EX_TEMPFAIL)


def git(repo: str, *args: str) -> str:
    proc = run_git(repo, *args)
    if proc.returncode == 0:
        return proc.stdout.decode("utf-8", errors="replace")
    err = proc.stderr.decode("utf-8", errors="replace").strip()
    low = err.lower()
    if "not a git repository" in low:
        fail(f"not a git repository: {repo}")
    if "dubious ownership" in low:
        fail(
            f"git refuses to read {repo}: it is owned by another user; on this machine run "
            f"`git config --global --add safe.directory {repo}` if you trust it"
        )
    if any(marker in low for marker in TRANSIENT_MARKERS):
        fail(f"git is busy in {repo} ({err.splitlines()[-1]}); try again", EX_TEMPFAIL)
    fail(f"git {args[0]} failed in {repo}: {err or f'exit code {proc.returncode}'}")


def parse_log(text: str) -> list[dict]:
    records: list[str] = []
    for piece in text.split("\x1e")[1:]:
        if records and not RECORD_START.match(piece):
            records[-1] += "\x1e" + piece  # a subject that itself contained 0x1E
        else:
            records.append(piece)
    commits = []
    for record in records:
        header, _, numstat = record.partition("\n")
        fields = header.split("\x1f", 4)
        if len(fields) != 5:
            continue  # not a header we wrote: never guess
        sha, author, email, date, subject = fields
        insertions = deletions = files = 0
        for line in numstat.splitlines():
            parts = line.split("\t", 2)
            if len(parts) != 3:
                continue
            files += 1
            # Binary files show "-\t-\tpath": a changed file without line counts.
            insertions += int(parts[0]) if parts[0].isdigit() else 0
            deletions += int(parts[1]) if parts[1].isdigit() else 0
        commits.append({
            "sha": sha, "author": author, "email": email, "date": date, "subject": subject,
            "insertions": insertions, "deletions": deletions, "files_changed": files,
        })
    return commits


def main() -> None:
    inputs = load_inputs()
    raw = inputs.get("repo_path")
    if not isinstance(raw, str) or not raw.strip():
        fail("repo_path is required: the path of a local git repository")
    since_days = int_input(inputs, "since_days", 7, 1, 36500)
    max_commits = int_input(inputs, "max_commits", 500, 1, 5000)

    path = resolve_path(raw)
    if not os.path.exists(path):
        fail(f"repo_path does not exist: {path}")
    if not os.path.isdir(path):
        fail(f"repo_path is not a directory: {path}")

    bare = git(path, "rev-parse", "--is-bare-repository").strip() == "true"
    top = git(path, "rev-parse", "--absolute-git-dir" if bare else "--show-toplevel").strip()
    name = os.path.basename(top)
    if bare and name.endswith(".git"):
        name = name[: -len(".git")] or name

    commits: list[dict] = []
    # A freshly initialised repository has no HEAD yet: that is "no commits", not an error.
    if run_git(path, "rev-parse", "--verify", "--quiet", "HEAD").returncode == 0:
        log = git(
            path, "log", f"--since={window_start(since_days)}", f"--max-count={max_commits}",
            f"--format={LOG_FORMAT}", "--numstat", "--no-renames", "--no-color",
            "--no-ext-diff", "--no-textconv", "HEAD", "--",
        )
        commits = parse_log(log)
        if len(commits) == max_commits:
            print(
                f"git-recent-commits: {name}: stopped at max_commits={max_commits}; "
                "older commits in the window are not counted",
                file=sys.stderr,
            )
    emit({"repo": name, "path": top, "commits": commits})


if __name__ == "__main__":
    main()
