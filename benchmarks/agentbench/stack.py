"""The stack: embedded servers, the local model server, one agent worker; and its vault."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from execbench.config import ROOT
from support.fake_llm import FakeLLMProcess

from orchestrator.connect import Connection
from orchestrator.embedded import resolve_endpoints, stop_embedded
from orchestrator.processes import stop_pids
from shared.celery_app import create_app
from shared.db.migrate import upgrade
from shared.settings import Settings
from shared.vault import Vault, load_vault

LOCAL_MODEL = "openai-chat:llama3.2"  # what examples/agent-local/README.md exports
WORKER = "bench-agent"
WORKER_READY_S = 60.0
PROVIDER_VARS = ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY",
                 "OPENAI_BASE_URL")
ONE_TURN = "triage-note"  # examples/agent-local: its answer is its first request
LOOP = "bench-loop"
LOOP_LOADS = 4  # `skill` tool calls before its answer: five requests in all
DOC = "bench-doc"

_LOOP_MD = f"""---
name: {LOOP}
description: >-
  A benchmark agent step: it loads {DOC} {LOOP_LOADS} times through the skill tool, then
  answers with one label. Use it only to measure agent steps of several turns.
version: 1
inputs:
  - name: text
    type: string
    required: true
    description: The text to label.
outputs:
  - name: label
    type: string
    description: One word.
approach: agent
model: {LOCAL_MODEL}
max_turns: 8
---

# {LOOP}

Load the {DOC} skill with the skill tool, {LOOP_LOADS} times, reading its rules each
time, then label the text with one word following them.
"""
_DOC_MD = f"""---
name: {DOC}
description: "Labelling rules for {LOOP}, loaded through the skill tool. Not a step of its own."
version: 1
approach: agent
---

# {DOC}

""" + "\n".join(f"{i}. Rule {i}: prefer the shortest word that names what the text is "
                "about; never a word the text does not support." for i in range(1, 13))


def write_vault(folder: Path) -> Vault:
    """triage-note copied from the example (a realistic prompt: body and rubric), and the
    five-turn skill with the one it loads."""
    folder.mkdir(parents=True)
    shutil.copytree(ROOT / "examples" / "agent-local" / ONE_TURN, folder / ONE_TURN)
    for name, text, subs in ((LOOP, _LOOP_MD, f'[{{"skill_id": "{DOC}", "role": "rules"}}]'),
                             (DOC, _DOC_MD, "[]")):
        (folder / name).mkdir()
        (folder / name / "SKILL.md").write_text(text)
        (folder / name / "sub-skills.json").write_text(f'{{"sub_skills": {subs}}}\n')
    vault = load_vault(folder)
    if not vault.valid:
        raise SystemExit(f"the benchmark vault is invalid: {vault.problems}")
    return vault


class _NoDelayServer(FakeLLMProcess):
    """FakeLLMProcess started through fake_server.py (TCP_NODELAY: see there)."""

    def __init__(self) -> None:
        super().__init__()
        self._argv = [sys.executable, str(Path(__file__).with_name("fake_server.py")),
                      "--port", "0"]


class AgentStack:
    """Embedded Redis and PostgreSQL, the local model server, one agent worker."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.vault_dir = home / "vault"
        self.worker: subprocess.Popen[bytes] | None = None
        self.log = home / "logs" / f"{WORKER}.log"
        self._exit = contextlib.ExitStack()
        self.started_servers = False

    def start(self, progress: Callable[[str], None]) -> None:
        self.settings = Settings(_env_file=None, home=self.home, vault=self.vault_dir,
                                 broker_url=None, database_url=None, result_backend=None)
        progress("starting Redis and PostgreSQL")
        self.started_servers = True
        self.endpoints = resolve_endpoints(self.settings)
        self.db = self.endpoints.database_url
        upgrade(self.db)
        self.vault = write_vault(self.vault_dir)
        self.app = create_app(self.settings, broker_url=self.endpoints.broker_url,
                              result_backend=self.endpoints.result_backend)
        self.conn = Connection(self.settings, self.endpoints, self.app, True)
        progress("starting the local model server")
        # A process of its own: it must not share this client's interpreter (or its GIL)
        # with the direct SDK calls it answers.
        self.fake = self._exit.enter_context(_NoDelayServer())
        # This process runs Pydantic AI and the executor in-process (a-pai, a-exec, b):
        # the same endpoint, read from the environment as on a worker.
        os.environ["OPENAI_BASE_URL"] = self.fake.openai_base_url
        progress("starting the agent worker")
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("SKILLQ_") and k not in PROVIDER_VARS}
        env.update(self.endpoints.env(), SKILLQ_HOME=str(self.home),
                   SKILLQ_VAULT=str(self.vault_dir), SKILLQ_AGENT_MODEL=LOCAL_MODEL,
                   OPENAI_BASE_URL=self.fake.openai_base_url, PYTHONUNBUFFERED="1")
        self.log.parent.mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, "-m", "workers.main", "--queues", "agent,control",
                "--concurrency", "2", "--name", WORKER]
        with self.log.open("ab") as fh:
            # Own session: a terminal's Ctrl-C reaches only this script, which stops it.
            self.worker = subprocess.Popen(argv, env=env, cwd=self.home, stdout=fh,
                                           stdin=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                                           start_new_session=True)
        self._wait_ready()

    def _wait_ready(self) -> None:
        node = f"{WORKER}@{socket.gethostname()}"
        deadline = time.monotonic() + WORKER_READY_S
        while True:
            assert self.worker is not None
            if self.worker.poll() is not None:
                raise SystemExit(f"worker {WORKER} exited; its log {self.log}:\n"
                                 + self.log.read_text(errors="replace")[-3000:])
            if any(node in reply for reply in
                   self.app.control.ping(destination=[node], timeout=0.5) or []):
                return
            if time.monotonic() > deadline:
                raise SystemExit(f"worker {WORKER} not ready after {WORKER_READY_S:.0f}s")

    def stop(self) -> None:
        if self.worker is not None and self.worker.poll() is None:
            # SIGTERM to the worker itself (warm shutdown), SIGKILL its group after 15 s.
            stop_pids([(self.worker.pid, signal.SIGTERM)], group=True, timeout_s=15)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.worker.wait(timeout=5)
        self._exit.close()
        if self.started_servers:
            stop_embedded(self.home)
            self.started_servers = False
