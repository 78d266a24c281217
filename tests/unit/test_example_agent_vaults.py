"""The example vaults' agent skills: they validate, and their steps go to the `agent` queue.

examples/youtube is the seed's pipeline (content-analyzer, blog-post-writer and
text-summarizer are instruction-only skills); examples/agent-local is the offline one
(triage-note on a local model). Both are checked the way a user meets them: `skillq
validate` as a subprocess, and the plan `skillq run` would freeze (shared/plan.py). The
agent-local scripts run here as a worker runs them (script protocol, stdin/stdout).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from shared.plan import build_plan
from shared.queues import QueueClass
from shared.vault import load_vault
from workers.agent.models import effective_model

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
YOUTUBE, LOCAL = EXAMPLES / "youtube", EXAMPLES / "agent-local"
SKILLQ = Path(sys.executable).with_name("skillq")
YOUTUBE_AGENTS = {"content-analyzer", "blog-post-writer", "text-summarizer"}
AGENT = QueueClass.AGENT.value


def validate(vault: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKILLQ_")}
    return subprocess.run([str(SKILLQ), "validate", str(vault)], capture_output=True,
                          text=True, timeout=60, cwd=tmp_path, env={**env, "NO_COLOR": "1"},
                          check=False)


@pytest.mark.parametrize(("vault", "skills"), [(YOUTUBE, 8), (LOCAL, 4)])
def test_the_example_vault_validates(vault: Path, skills: int, tmp_path: Path) -> None:
    done = validate(vault, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"✓ {skills} skill(s) valid" in done.stdout


def test_the_youtube_pipelines_agent_steps_are_planned_on_the_agent_queue() -> None:
    vault = load_vault(YOUTUBE)
    assert vault.valid, vault.problems
    agents = {n for n, s in vault.skills.items() if s.manifest.kind == "instructions"}
    assert agents == YOUTUBE_AGENTS
    plan = build_plan(vault.get("youtube-creator-analytics"), vault.skills,
                      {"creator_urls": ["https://www.youtube.com/@example"]})
    queues = {s.id: (s.skill, s.kind, s.queue) for s in plan.steps}
    assert queues == {
        "videos": ("youtube-channel-videos", "script", "default"),
        "transcript": ("youtube-transcript", "script", "default"),
        "comments": ("youtube-comments", "script", "default"),
        "thumbnails": ("youtube-thumbnails", "script", "default"),
        "analysis": ("content-analyzer", "instructions", AGENT),
        "write": ("blog-post-writer", "instructions", AGENT),
    }
    # text-summarizer is no step of the pipeline (the agents load it through the skill
    # tool); run on its own it is a one-step plan on the agent queue too.
    for name in sorted(YOUTUBE_AGENTS):
        (step,) = build_plan(vault.get(name), vault.skills, {}).steps
        assert (step.kind, step.queue) == ("instructions", AGENT), name


def test_the_local_pipeline_puts_only_the_triage_on_the_agent_queue() -> None:
    vault = load_vault(LOCAL)
    assert vault.valid, vault.problems
    plan = build_plan(vault.get("triage-inbox"), vault.skills, {"folder": "inbox"})
    assert [(s.id, s.kind, s.queue, s.fans_out) for s in plan.steps] == [
        ("read", "script", "default", False),
        ("triage", "instructions", AGENT, True),
        ("board", "script", "default", False),
    ]
    m = vault.get("triage-note").manifest
    # Written for llama3.2 on a Chat Completions server; a daemon's default model wins
    # (model_override: false), so another local model needs no edit.
    assert str(effective_model(m.model, m.model_override, None)) == "openai-chat:llama3.2"
    assert str(effective_model(m.model, m.model_override, "openai-chat:qwen2.5")) == \
        "openai-chat:qwen2.5"
    assert (m.max_turns, m.tools_used, m.budget_usd) == (3, (), None)


# ------------------------------------------------------------ agent-local's two scripts


def script(folder: str, command: str, inputs: dict[str, Any], *, workdir: Path | None = None
           ) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("SKILL_INPUTS", "SKILL_OUTPUT")}
    if workdir is not None:
        env["SKILLQ_WORKDIR"] = str(workdir)
    return subprocess.run([sys.executable, command], input=json.dumps(inputs),
                          capture_output=True, text=True, timeout=30, cwd=LOCAL / folder,
                          env=env, check=False)


def test_read_notes_reads_the_notes_of_a_relative_folder_in_name_order(tmp_path: Path) -> None:
    inbox = tmp_path / "inbox"
    (inbox / "sub").mkdir(parents=True)
    (inbox / "b.md").write_text("  second\n")
    (inbox / "a.txt").write_text("first " * 10)
    (inbox / "empty.txt").write_text("\n")
    (inbox / "image.png").write_bytes(b"\x89PNG")
    (inbox / "sub" / "deep.txt").write_text("not read")
    (inbox / "odd.txt").write_bytes(b"caf\xe9")
    done = script("read-notes", "read_notes.py", {"folder": "inbox", "max_chars": 11},
                  workdir=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"count": 3, "notes": [
        {"file": "a.txt", "text": "first first"}, {"file": "b.md", "text": "second"},
        {"file": "odd.txt", "text": "caf\ufffd"}]}


def test_read_notes_fails_permanently_on_a_missing_folder(tmp_path: Path) -> None:
    done = script("read-notes", "read_notes.py", {"folder": str(tmp_path / "none")})
    assert done.returncode == 1
    assert "not a folder" in done.stderr


def test_triage_board_sorts_high_first_and_keeps_unknown_priorities_last() -> None:
    notes = [{"file": f"{c}.txt", "text": c} for c in "abcd"]
    triage = [{"category": "request", "priority": "low", "summary": "Dark | mode"},
              {"category": "question", "priority": "urgent", "summary": "Help?"},
              {"category": "bug", "priority": "High", "summary": "Export\nbroken."},
              {"category": "chore", "priority": "medium", "summary": "Renew certs."}]
    done = script("triage-board", "board.py", {"notes": notes, "triage": triage})
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert [(i["file"], i["priority"]) for i in out["items"]] == [
        ("c.txt", "high"), ("d.txt", "medium"), ("a.txt", "low"), ("b.txt", "urgent")]
    assert out["counts"] == {"high": 1, "medium": 1, "low": 1, "urgent": 1}
    rows = out["board"].splitlines()
    assert rows[2] == "| high | bug | c.txt | Export broken. |"
    assert rows[4] == "| low | request | a.txt | Dark \\| mode |"


def test_triage_board_refuses_lists_that_do_not_pair() -> None:
    done = script("triage-board", "board.py", {"notes": [{"file": "a", "text": "x"}],
                                               "triage": []})
    assert done.returncode == 1
    assert "pair by position" in done.stderr
