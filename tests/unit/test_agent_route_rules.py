"""Routing an agent step (lifecycle/routing.py, lifecycle/agent_routing.py): to a daemon
whose worker serving the queue holds the credentials of the model the step would run on
there, from what the daemons announced; no services involved."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pytest

from lifecycle.agent_routing import WorkerModels
from lifecycle.routing import NoRoute, OnlineDaemon, route
from shared.manifest import Requires
from shared.plan import AgentModel, build_plan
from shared.vault import load_vault

AGENTS = Path(__file__).parents[1] / "integration" / "vaults" / "agents"
PINNED = AgentModel(model="anthropic:claude-haiku-4-5", override=True)
LOOSE = AgentModel(model="anthropic:claude-haiku-4-5", override=False)


def daemon(name: str, providers: Iterable[str] = (), default: str | None = None, *,
           queues: tuple[str, ...] = ("agent",), role: str = "agent",
           others: tuple[WorkerModels, ...] = ()) -> OnlineDaemon:
    served = frozenset({*queues, *(f"{q}@{name}" for q in queues)})
    worker = WorkerModels(served, frozenset(providers), default)
    return OnlineDaemon(name, role, "this-machine",
                        served | {q for w in others for q in w.queues},
                        frozenset(), frozenset(), frozenset(), (worker, *others))


def queues(agent: AgentModel | None, *daemons: OnlineDaemon) -> tuple[str, ...]:
    return route("agent", Requires(), daemons, agent).queues


def test_model_override_needs_the_provider_of_the_skills_model() -> None:
    keyed = daemon("keyed", {"anthropic"}, "openai:gpt-4.1")
    other = daemon("other", {"openai"}, "openai:gpt-4.1")
    assert queues(PINNED, keyed, other) == ("agent@keyed",)


def test_otherwise_the_provider_of_the_daemons_own_default() -> None:
    chat = daemon("chat", {"openai-chat"}, "openai-chat:llama3")  # no Anthropic key
    plain = daemon("plain")  # no default: the skill's anthropic model, no key for it
    assert queues(LOOSE, chat, plain) == ("agent@chat",)
    # The skill pins its model: the daemon's default no longer counts.
    with pytest.raises(NoRoute, match="ANTHROPIC_API_KEY"):
        queues(PINNED, chat, plain)


def test_without_a_default_the_provider_of_the_skills_model() -> None:
    keyed = daemon("keyed", {"anthropic"})
    plain = daemon("plain", {"openai"})
    assert queues(LOOSE, keyed, plain) == ("agent@keyed",)


def test_every_daemon_able_keeps_the_shared_queue() -> None:
    assert queues(PINNED, daemon("a", {"anthropic"}), daemon("b", {"anthropic"})) == ("agent",)


def test_the_same_missing_setting_everywhere_is_named_once() -> None:
    with pytest.raises(NoRoute) as caught:
        queues(PINNED, daemon("a", {"openai"}), daemon("b"))
    assert str(caught.value).startswith(
        "no online daemon serving 'agent' (a, b) has ANTHROPIC_API_KEY (for model "
        "anthropic:claude-haiku-4-5); set it in the environment of a worker serving 'agent'")


def test_different_needs_are_named_per_daemon() -> None:
    with pytest.raises(NoRoute) as caught:
        queues(LOOSE, daemon("a", {"anthropic"}, "openai:gpt-4.1"), daemon("b", {"openai"}))
    assert str(caught.value) == (
        "no online daemon serving 'agent' has what it requires (a lacks OPENAI_API_KEY (for "
        "model openai:gpt-4.1); b lacks ANTHROPIC_API_KEY (for model "
        "anthropic:claude-haiku-4-5))")


def test_no_model_anywhere_and_a_bad_default_name_the_setting() -> None:
    with pytest.raises(NoRoute, match=r"a lacks a model \(SKILLQ_AGENT_MODEL unset there"):
        queues(AgentModel(), daemon("a", {"anthropic"}), daemon("b", {"anthropic"}, "llama3"))
    with pytest.raises(NoRoute, match=r"b lacks a valid SKILLQ_AGENT_MODEL \(its value "
                                      r"'llama3' is not provider:name\)"):
        queues(AgentModel(), daemon("a", {"anthropic"}), daemon("b", {"anthropic"}, "llama3"))


def test_only_the_workers_taking_the_queue_count() -> None:
    # The daemon's default worker holds no key and does not matter; a second agent
    # worker without the key does: a message on agent@mixed may go to either.
    default_worker = WorkerModels(frozenset({"default", "default@host"}), frozenset(), None)
    host = daemon("host", {"anthropic"}, others=(default_worker,))
    keyless_agent = WorkerModels(frozenset({"agent", "agent@mixed"}), frozenset(), None)
    mixed = daemon("mixed", {"anthropic"}, others=(keyless_agent,))
    assert queues(PINNED, host, mixed) == ("agent@host",)


def test_a_pinned_daemon_without_the_key_is_refused() -> None:
    pinned = Requires(daemon="plain")
    with pytest.raises(NoRoute, match="pinned to daemon 'plain', which lacks "
                                      "ANTHROPIC_API_KEY"):
        route("agent", pinned, [daemon("plain"), daemon("keyed", {"anthropic"})], PINNED)


def test_steps_that_are_not_agent_steps_ignore_models() -> None:
    assert route("agent", Requires(), [daemon("plain")]).queues == ("agent",)


def test_the_plan_carries_an_agent_steps_model() -> None:
    vault = load_vault(AGENTS)
    (step,) = build_plan(vault.get("summarize"), vault.skills, {"text": "x"}).steps
    assert (step.kind, step.queue) == ("instructions", "agent")
    assert step.agent == PINNED
