"""The list commands through the real CLI on a real stack: `skillq runs` with its filters
and triggered-by column, `--json` arrays a script parses (runs, notes, daemons, daemon
keys, versions, bench, schedule list), tab-separated whole rows when piped, a table that
fits a real terminal (a pty) without breaking words, and cron nicknames (@daily)."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import struct
import subprocess
import termios
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from conftest import HOST, RunResult, Stack, skillq_argv

from shared.cron import parse_cron

pytestmark = pytest.mark.integration

RunSkill = Callable[..., RunResult]
RUN_KEYS = {"run_id", "skill", "version", "state", "source", "triggered_by", "created_at",
            "started_at", "finished_at", "duration_s", "error", "failed_step",
            "failed_item"}
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def listed(stack: Stack, *args: str, cwd: Path) -> list[dict[str, Any]]:
    """A list command's --json: one array of objects, nothing else on stdout."""
    proc = stack.cli(*args, "--json", cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert isinstance(data, list) and all(isinstance(d, dict) for d in data), proc.stdout
    return data


def ids(rows: list[dict[str, Any]]) -> set[str]:
    return {r["run_id"] for r in rows}


def utc(text: str) -> datetime:
    moment = datetime.fromisoformat(text)
    assert moment.utcoffset() == timedelta(0), text
    return moment


def in_terminal(stack: Stack, *args: str, cwd: Path, columns: int) -> str:
    """The CLI with stdout on a pseudo-terminal ``columns`` wide: what a user sees."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    env = {**stack.cli_env, "COLUMNS": str(columns), "NO_COLOR": "1", "TERM": "xterm"}
    chunks: list[bytes] = []

    def drain() -> None:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child's side closed
                return
            if not chunk:
                return
            chunks.append(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        proc = subprocess.run(skillq_argv(*args), env=env, cwd=cwd, stdout=slave,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(slave)
    reader.join(timeout=10)
    os.close(master)
    assert proc.returncode == 0, proc.stderr
    return ANSI.sub("", b"".join(chunks).decode()).replace("\r\n", "\n")


@pytest.fixture
def two_runs(run_skill: RunSkill, vault: Path) -> tuple[RunResult, RunResult]:
    ok = run_skill("echo", vault, inputs={"text": "hi"})
    assert ok.code == 0 and ok.run_id, ok
    bad = run_skill("fail-on", vault, inputs={"item": "x", "fail": ["x"]})
    assert bad.code == 1 and bad.run_id, bad
    return ok, bad


def test_runs_json_filters_and_triggered_by(healthy: Stack, two_runs: tuple[RunResult,
                                            RunResult], tmp_path: Path) -> None:
    ok, bad = two_runs
    rows = {r["run_id"]: r for r in listed(healthy, "runs", "--limit", "100", cwd=tmp_path)}
    assert {ok.run_id, bad.run_id} <= set(rows)
    assert all(set(r) == RUN_KEYS for r in rows.values())
    mine, failed = rows[ok.run_id or ""], rows[bad.run_id or ""]
    record = healthy.run(ok.run_id or "")
    assert (mine["skill"], mine["version"], mine["state"], mine["source"],
            mine["triggered_by"]) == ("echo", 1, "succeeded", "production", "cli")
    assert utc(mine["created_at"]) == record.created_at
    assert record.started_at and record.finished_at
    assert mine["duration_s"] == round(
        (record.finished_at - record.started_at).total_seconds(), 3)
    assert isinstance(mine["duration_s"], float) and mine["error"] is None
    assert (failed["state"], failed["failed_step"]) == ("failed", "fail-on")
    assert "boom" in failed["error"]

    def only(*args: str) -> set[str]:
        return ids(listed(healthy, "runs", "--limit", "1000", *args, cwd=tmp_path)) & {
            ok.run_id, bad.run_id}

    assert only("--state", "failed") == {bad.run_id}
    assert only("--state", "failed", "--state", "succeeded") == {ok.run_id, bad.run_id}
    assert only("--source", "production") == {ok.run_id, bad.run_id}
    assert only("--source", "test_window") == set()
    assert only("--trigger", "cli") == {ok.run_id, bad.run_id}
    assert only("--trigger", "schedule") == set()
    assert only("echo") == {ok.run_id}
    assert only("--since", "1h") == {ok.run_id, bad.run_id}
    after_ok = (record.created_at + timedelta(microseconds=1)).isoformat()
    assert only("--since", after_ok) == {bad.run_id}
    assert only("--since", (datetime.now(UTC) + timedelta(days=1)).date().isoformat()) == set()

    refused = healthy.cli("runs", "--since", "yesterday", cwd=tmp_path)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
    said = " ".join(refused.stderr.split())
    assert "'--since'" in said and "'yesterday' is neither an age (30m, 2h, 1d, 1w) nor an " \
        "ISO date or time" in said, said
    wrong = healthy.cli("runs", "--state", "done", cwd=tmp_path)
    assert wrong.returncode == 2 and "'done' is not one of" in wrong.stderr, wrong.stderr


def test_runs_piped_prints_whole_tab_separated_rows(
        healthy: Stack, two_runs: tuple[RunResult, RunResult], tmp_path: Path) -> None:
    ok, bad = two_runs
    piped = healthy.cli("runs", "--limit", "100", cwd=tmp_path, env={"COLUMNS": "40"})
    assert piped.returncode == 0, piped.stderr
    header, *lines = piped.stdout.splitlines()
    keys = header.split("\t")
    assert keys == ["run_id", "skill", "version", "state", "source", "triggered_by",
                    "created_at", "duration_s", "error"]
    rows = {cells[0]: dict(zip(keys, cells, strict=True))
            for cells in (line.split("\t") for line in lines)}
    assert len(rows) == len(lines)  # one line per run: nothing folded at 40 columns
    assert (rows[ok.run_id or ""]["state"], rows[ok.run_id or ""]["triggered_by"]) == (
        "succeeded", "cli")
    error = healthy.run(bad.run_id or "").error or ""
    assert rows[bad.run_id or ""]["error"] == " ".join(error.split())  # whole

    nothing = healthy.cli("runs", "--trigger", "no-such-trigger", cwd=tmp_path)
    assert nothing.returncode == 0 and nothing.stdout == header + "\n"
    assert "no runs match" in nothing.stderr


@pytest.mark.parametrize("columns", [80, 200])
def test_runs_in_a_terminal_fit_its_width_without_breaking_words(
        healthy: Stack, two_runs: tuple[RunResult, RunResult], tmp_path: Path,
        columns: int) -> None:
    ok, bad = two_runs
    shown = in_terminal(healthy, "runs", "--limit", "5", cwd=tmp_path, columns=columns)
    lines = shown.splitlines()
    assert lines and max(len(line.rstrip()) for line in lines) <= columns, shown
    words = set(shown.split())
    assert {ok.run_id, bad.run_id, "echo", "fail-on", "succeeded", "failed"} <= words, shown
    error = " ".join((healthy.run(bad.run_id or "").error or "")[:199].split()[:-1])
    assert set(error.split()) <= words, shown  # wrapped between words, none cut
    assert "…" not in shown, shown
    said = " ".join(shown.split())
    if columns == 200:
        assert "cli" in words and "triggered by" in said and "not shown" not in said
    else:
        assert "not shown, for width:" in said and "(--json has them)" in said


def test_every_list_command_has_json_and_a_tsv_header(
        healthy: Stack, two_runs: tuple[RunResult, RunResult], vault: Path,
        tmp_path: Path) -> None:
    daemons = {d["daemon"]: d for d in listed(healthy, "daemons", cwd=tmp_path)}
    assert daemons[HOST]["online"] is True
    assert utc(daemons[HOST]["heartbeat_at"]) <= datetime.now(UTC)
    assert isinstance(daemons[HOST]["capabilities"], list)
    keys = listed(healthy, "daemons", "keys", cwd=tmp_path)
    assert all(utc(k["enrolled_at"]) and set(k) >= {"fingerprint", "daemon", "revoked_at"}
               for k in keys)
    assert set(daemons[HOST]["key_fingerprints"]) <= {k["fingerprint"] for k in keys}

    notes = listed(healthy, "notes", "--all", cwd=tmp_path)
    assert all(isinstance(n["id"], int) and utc(n["last_seen"]) for n in notes)

    versions = listed(healthy, "versions", "echo", "--vault", str(vault), cwd=tmp_path)
    (v1,) = versions  # echo is never published here: its runs are v1's
    assert (v1["version"], v1["published"], v1["note"]) == (1, False, "never published")
    assert isinstance(v1["runs"], int) and v1["runs"] >= 1
    assert 0 <= v1["success_rate"] <= 1
    bench = listed(healthy, "bench", "echo", "--vault", str(vault), cwd=tmp_path)
    assert bench[0]["version"] == 1 and bench[0]["runs"] == v1["runs"]
    assert isinstance(bench[0]["median_ms"], float | int)

    for args, first in ((["daemons"], "daemon\tonline\trole\theartbeat_at"),
                        (["daemons", "keys"], "fingerprint\tdaemon\tenrolled_at"),
                        (["notes", "--all"], "id\tstatus\tskill\tstep"),
                        (["versions", "echo", "--vault", str(vault)],
                         "version\tpublished_at\tpublished_by\tfolder_hash"),
                        (["bench", "echo", "--vault", str(vault)], "version\truns\t"),
                        (["schedule", "list"], "id\tskill\tcron\ttz\tnext_run")):
        piped = healthy.cli(*args, cwd=tmp_path)
        assert piped.returncode == 0, piped.stderr
        assert piped.stdout.startswith(first), (args, piped.stdout)
        assert "│" not in piped.stdout and "━" not in piped.stdout  # no table drawn
    state = healthy.cli("versions", "echo", "--vault", str(vault), "--json", cwd=tmp_path)
    assert "v1, not published" in state.stderr and "not published" not in state.stdout


def test_cron_nicknames_schedule_like_their_five_fields(
        healthy: Stack, vault: Path, tmp_path: Path) -> None:
    now = datetime.now(UTC)
    for nickname, line in (("@hourly", "0 * * * *"), ("@daily", "0 0 * * *"),
                           ("@weekly", "0 0 * * 0"), ("@monthly", "0 0 1 * *"),
                           ("@yearly", "0 0 1 1 *"), ("@annually", "0 0 1 1 *"),
                           ("@midnight", "0 0 * * *")):
        same = parse_cron(line, "Europe/Paris").next_after(now)
        assert parse_cron(nickname, "Europe/Paris").next_after(now) == same
        assert parse_cron(nickname.upper(), "UTC").text == nickname

    added = healthy.cli("schedule", "add", "echo", "--cron", "@daily", "--tz", "Europe/Paris",
                        "--input", "text=nightly", "--vault", str(vault), cwd=tmp_path)
    assert added.returncode == 0, added.stderr
    sid = int(re.search(r"^schedule (\d+):", added.stdout).group(1))  # type: ignore[union-attr]
    try:
        assert "at '@daily' (Europe/Paris)" in added.stdout
        rows = {r["id"]: r for r in listed(healthy, "schedule", "list", cwd=tmp_path)}
        mine = rows[sid]
        assert (mine["cron"], mine["tz"], mine["paused"]) == ("@daily", "Europe/Paris", False)
        due = utc(mine["next_run"])
        assert due == parse_cron("0 0 * * *", "Europe/Paris").next_after(
            due - timedelta(seconds=1))
        assert timedelta(0) < due - datetime.now(UTC) <= timedelta(days=1)
        assert mine["inputs"]["text"] == "nightly"

        before = len(rows)
        for bad, says in (("@reboot", "not at start-up"),
                          ("@fortnightly", "unknown nickname; use one of @yearly")):
            refused = healthy.cli("schedule", "add", "echo", "--cron", bad, "--input",
                                  "text=x", "--vault", str(vault), cwd=tmp_path)
            assert refused.returncode != 0 and "Traceback" not in refused.stderr
            assert f"--cron '{bad}'" in refused.stderr and says in refused.stderr, \
                refused.stderr
        assert len(listed(healthy, "schedule", "list", cwd=tmp_path)) == before
    finally:
        assert healthy.cli("schedule", "remove", str(sid), cwd=tmp_path).returncode == 0
