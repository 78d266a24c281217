"""Agent steps go to a daemon that holds their model's credentials, and a run none can
serve is refused before anything runs.

Besides the stack's own workers (the host daemon, whose agent worker holds no model
key), real daemons are started as ``python -m workers.main --daemon NAME --queues agent``,
each with its own SKILLQ_HOME and environment: ``plain`` holds no provider variable,
``chat`` only the OpenAI ones and SKILLQ_AGENT_MODEL=openai-chat:llama3, ``keyed`` every
provider's. They talk to the local fake model server (tests/support/fake_llm), so the
steps routed to them really run. The fixture vault is tests/integration/vaults/agents.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import (
    VAULTS,
    RunResult,
    Stack,
    add_orchestrator,
    copy_vault,
    wait_until,
)
from sqlalchemy import delete, select
from support.fake_llm import FakeLLM

from shared.db.agent_models import AgentTurn
from shared.db.daemon_models import Daemon
from shared.model_spec import PROVIDER_VARIABLES

pytestmark = pytest.mark.integration
RunSkill = Callable[..., RunResult]
AGENT_WORKER = "agent-gpu-cmd0"  # the host daemon's agent worker (conftest)
# The CLI counts a stopped daemon offline this soon (its first dispatch routes there).
FAST = {"SKILLQ_DAEMON_OFFLINE_AFTER_S": "2"}
USAGE = {"input": 100, "output": 20}


@dataclass
class AgentDaemon:
    name: str
    proc: subprocess.Popen[bytes]

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, 9)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)


def without_keys(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k not in PROVIDER_VARIABLES}


class Daemons:
    """Agent daemons started on demand, stopped and forgotten at the module's end (so no
    later test routes to a queue nobody consumes)."""

    def __init__(self, stack: Stack, root: Path) -> None:
        self.stack, self.root, self.started = stack, root, {}

    def start(self, name: str, extra: dict[str, str]) -> AgentDaemon:
        if name in self.started:
            return self.started[name]
        home = self.root / f"{name}-home"
        home.mkdir()
        env = {**without_keys(self.stack.env), **FAST, "SKILLQ_HOME": str(home), **extra}
        with (home / "worker.log").open("ab") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "workers.main", "--queues", "agent", "--concurrency",
                 "1", "--name", "a", "--daemon", name], env=env, cwd=home,
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True)
        self.started[name] = daemon = AgentDaemon(name, proc)
        wait_until(lambda: self.announced(f"a@{name}"), 60, f"daemon {name} to announce")
        return daemon

    def announced(self, node: str) -> bool:
        return self.stack.daemon_worker(node) is not None

    def stop_all(self) -> None:
        for daemon in self.started.values():
            daemon.stop()
        with self.stack.db() as session:
            session.execute(delete(Daemon).where(Daemon.name.in_(list(self.started))))


@pytest.fixture(scope="module")
def daemons(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemons]:
    started = Daemons(stack, tmp_path_factory.mktemp("agent-daemons"))
    try:
        yield started
    finally:
        started.stop_all()


@pytest.fixture
def worker_env(stack: Stack) -> dict[str, dict[str, str | None]]:
    """The host's agent worker without the model keys this shell has, if any (``healthy``
    restarts it so, once for the module's tests)."""
    return {AGENT_WORKER: dict.fromkeys(sorted(PROVIDER_VARIABLES & stack.env.keys()))}


@pytest.fixture
def host_without_keys(healthy: Stack) -> Stack:
    """The stack, its agent worker sure to hold no model key (whatever this shell has)."""
    return healthy


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    return copy_vault(VAULTS / "agents", tmp_path / "vault")


def key() -> str:
    return f"route-{uuid.uuid4().hex[:12]}"


def answer(**outputs: object) -> dict[str, object]:
    return {"output": outputs, "usage": USAGE}


def test_no_daemon_with_the_key_refuses_the_run_before_anything_runs(
        host_without_keys: Stack, daemons: Daemons, run_skill: RunSkill,
        vault: Path) -> None:
    daemons.start("plain", {})
    before = len(host_without_keys.runs_of("summarize"))
    refused = run_skill("summarize", vault, inputs={"text": "x"}, env=FAST)
    assert refused.code == 1, refused
    assert "Traceback" not in refused.stderr
    message = " ".join(refused.stderr.split())
    assert "step 'summarize' (summarize) needs queue 'agent'" in message, message
    assert "no online daemon serving 'agent' (" in message and "plain" in message
    assert "has ANTHROPIC_API_KEY (for model anthropic:claude-haiku-4-5)" in message
    assert refused.run_id is None
    assert len(host_without_keys.runs_of("summarize")) == before  # nothing recorded

    # Two orchestrators down, the agent step is found and named by its path.
    add_orchestrator(vault, "inner", "summarize", step="sum")
    add_orchestrator(vault, "outer", "inner", step="inner")
    # Other tests on this stack run skills named "inner" too: count, do not expect none.
    inner_before = len(host_without_keys.runs_of("inner"))
    nested = run_skill("outer", vault, inputs={"text": "x"}, env=FAST)
    assert nested.code == 1, nested
    message = " ".join(nested.stderr.split())
    assert "step 'inner/sum' (summarize) needs queue 'agent'" in message, message
    assert "ANTHROPIC_API_KEY" in message and "Traceback" not in nested.stderr
    assert nested.run_id is None
    assert len(host_without_keys.runs_of("inner")) == inner_before  # nothing recorded


def test_without_model_override_the_daemons_own_default_decides(
        host_without_keys: Stack, daemons: Daemons, llm: FakeLLM, run_skill: RunSkill,
        vault: Path) -> None:
    daemons.start("plain", {})
    openai_only = {k: v for k, v in llm.env().items() if k.startswith("OPENAI_")}
    daemons.start("chat", {**openai_only, "SKILLQ_AGENT_MODEL": "openai-chat:llama3"})
    k = key()
    llm.script(k, answer(summary="short", words=2))
    # summarize-default names an Anthropic model but does not pin it: chat runs it on its
    # own default, which it holds the credentials for; plain and the host hold none.
    result = run_skill("summarize-default", vault, "--json",
                       inputs={"text": f"{llm.marker(k)} two words"}, env=FAST)
    assert result.code == 0, result
    assert result.json() == {"summary": "short", "words": 2}
    (step,) = host_without_keys.steps(result.run_id or "")
    assert (step.daemon, step.queue) == ("chat", "agent@chat")
    assert step.route is not None and "chat has what it requires" in step.route
    with host_without_keys.db() as session:
        served = set(session.scalars(select(AgentTurn.model_requested)
                                     .where(AgentTurn.run_id == result.run_id)))
    assert served == {"openai-chat:llama3"}
    assert [r["path"] for r in llm.requests(k)] == ["/v1/chat/completions"]


def test_the_step_lands_on_the_only_daemon_holding_the_key(
        host_without_keys: Stack, daemons: Daemons, llm: FakeLLM, run_skill: RunSkill,
        vault: Path) -> None:
    daemons.start("plain", {})
    daemons.start("keyed", llm.env())
    k = key()
    llm.script(k, answer(summary="plain words", words=2))
    result = run_skill("summarize", vault, "--json",
                       inputs={"text": f"{llm.marker(k)} two words"}, env=FAST)
    assert result.code == 0, result
    assert result.json() == {"summary": "plain words", "words": 2}
    (step,) = host_without_keys.steps(result.run_id or "")
    assert (step.state, step.daemon, step.queue) == ("succeeded", "keyed", "agent@keyed")
    assert step.route is not None and "keyed has what it requires" in step.route
    assert len(llm.requests(k)) == 1


def test_daemons_lists_the_providers_never_the_keys(
        host_without_keys: Stack, daemons: Daemons, llm: FakeLLM, tmp_path: Path) -> None:
    daemons.start("plain", {})
    daemons.start("keyed", llm.env())
    listing = host_without_keys.cli("daemons", "--json", cwd=tmp_path, env=FAST)
    assert listing.returncode == 0, listing.stderr
    shown = {d["daemon"]: d for d in json.loads(listing.stdout)}
    assert shown["keyed"]["model_providers"] == ["anthropic", "openai", "openai-chat"]
    assert shown["keyed"]["agent_models"] == []
    assert shown["plain"]["model_providers"] == []
    if "chat" in shown:
        assert shown["chat"]["agent_models"] == ["openai-chat:llama3"]
    table = host_without_keys.cli("daemons", cwd=tmp_path, env={**FAST, "COLUMNS": "250"})
    for output in (listing.stdout, table.stdout):
        for value in llm.env().values():
            assert value not in output
    assert "anthropic, openai, openai-chat" in table.stdout
