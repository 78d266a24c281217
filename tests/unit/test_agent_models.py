"""Model resolution for agent steps: which provider a model string means, which model a
step runs on, and which credentials a provider needs (workers/agent/models.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared import errors
from shared.errors import AgentError, SkillqError
from shared.vault import load_vault
from workers.agent.models import (
    PROVIDERS,
    ModelRef,
    credentials,
    effective_model,
    providers_held,
    resolve,
)

EXAMPLES = Path(__file__).parents[2] / "examples"


@pytest.mark.parametrize(("spec", "provider", "name"), [
    ("anthropic:claude-haiku-4-5", "anthropic", "claude-haiku-4-5"),
    ("openai:gpt-4.1", "openai", "gpt-4.1"),
    ("openai-chat:llama3", "openai-chat", "llama3"),
    ("openai-chat:qwen2.5:7b", "openai-chat", "qwen2.5:7b"),  # Ollama tags keep their colon
    ("  anthropic:claude-sonnet-4-5  ", "anthropic", "claude-sonnet-4-5"),
    # The seed's bare names: the prefix says whose they are.
    ("claude-haiku-4-5-20251001", "anthropic", "claude-haiku-4-5-20251001"),
    ("gpt-4o-mini", "openai", "gpt-4o-mini"),
    ("o1", "openai", "o1"),
    ("o3-mini", "openai", "o3-mini"),
    ("o4-mini", "openai", "o4-mini"),
])
def test_accepted_forms_resolve(spec: str, provider: str, name: str) -> None:
    ref = resolve(spec)
    assert ref == ModelRef(provider, name)
    assert ref.pydantic_ai_string == f"{provider}:{name}" == str(ref)


@pytest.mark.parametrize("spec", ["llama3", "gemini-2.5-pro", "ollama", "claude", "gpt4",
                                  "google:gemini-2.5-pro", "anthropic:", "openai-chat: x", ""])
def test_anything_else_is_refused_naming_the_value_and_the_forms(spec: str) -> None:
    with pytest.raises(AgentError) as caught:
        resolve(spec, where="SKILLQ_AGENT_MODEL")
    message = str(caught.value)
    assert f"'{spec}'" in message and message.startswith("SKILLQ_AGENT_MODEL: ")
    assert "provider:name" in message and "openai-chat:" in message


def test_a_misspelt_provider_gets_a_suggestion() -> None:
    with pytest.raises(AgentError, match="did you mean 'anthropic:claude-haiku-4-5'"):
        resolve("antropic:claude-haiku-4-5")


def test_agent_error_is_a_documented_skillq_error() -> None:
    assert issubclass(AgentError, SkillqError)
    assert "AgentError" in (errors.__doc__ or "")


@pytest.mark.parametrize(("manifest", "override", "daemon", "requested", "expected"), [
    # model_override: the skill's model wins over everything (seed 2.2).
    ("claude-haiku-4-5", True, "openai:gpt-4.1", "openai:o3", "anthropic:claude-haiku-4-5"),
    # Otherwise an execute_skill call's model, then the daemon's default, then the skill's.
    ("claude-haiku-4-5", False, "openai:gpt-4.1", "openai:o3", "openai:o3"),
    ("claude-haiku-4-5", False, "openai:gpt-4.1", None, "openai:gpt-4.1"),
    ("claude-haiku-4-5", False, None, None, "anthropic:claude-haiku-4-5"),
    ("claude-haiku-4-5", True, None, None, "anthropic:claude-haiku-4-5"),
    (None, True, "openai-chat:llama3", None, "openai-chat:llama3"),  # nothing to pin
    (None, False, None, "gpt-4.1", "openai:gpt-4.1"),
])
def test_effective_model_precedence(manifest: str | None, override: bool, daemon: str | None,
                                    requested: str | None, expected: str) -> None:
    assert effective_model(manifest, override, daemon, requested).pydantic_ai_string == expected


def test_no_model_anywhere_names_the_setting() -> None:
    with pytest.raises(AgentError, match="SKILLQ_AGENT_MODEL"):
        effective_model(None, False, None)


def test_a_bad_value_names_where_it_came_from() -> None:
    with pytest.raises(AgentError, match=r"^SKILLQ_AGENT_MODEL: model 'llama3'"):
        effective_model("claude-haiku-4-5", False, "llama3")
    with pytest.raises(AgentError, match=r"^the skill's model: model 'gemini-pro'"):
        effective_model("gemini-pro", True, "openai:gpt-4.1")


@pytest.mark.parametrize("alias", ["sonnet", "inherit", "Opus", "haiku"])
def test_a_claude_code_alias_counts_as_no_model(alias: str) -> None:
    # Claude Code's `model: sonnet` names a family only Claude Code resolves, `inherit`
    # the session's model: the step runs on what it would run on had the skill set none.
    assert str(effective_model(alias, True, "openai:gpt-4.1")) == "openai:gpt-4.1"
    assert str(effective_model(alias, False, None, "claude-haiku-4-5")) == \
        "anthropic:claude-haiku-4-5"
    with pytest.raises(AgentError, match=rf"the skill's model '{alias}' is a Claude Code "
                       "alias.*set SKILLQ_AGENT_MODEL"):
        effective_model(alias, False, None)


@pytest.mark.parametrize(("provider", "env", "missing"), [
    ("anthropic", {}, "ANTHROPIC_API_KEY"),
    ("anthropic", {"ANTHROPIC_API_KEY": "  "}, "ANTHROPIC_API_KEY"),  # blank is unset
    ("anthropic", {"ANTHROPIC_API_KEY": "sk-ant"}, None),
    ("openai", {"OPENAI_BASE_URL": "http://localhost:11434/v1"}, "OPENAI_API_KEY"),
    ("openai", {"OPENAI_API_KEY": "sk"}, None),
    # A local Chat Completions server needs an address, not a key.
    ("openai-chat", {"OPENAI_API_KEY": "sk"}, "OPENAI_BASE_URL"),
    ("openai-chat", {"OPENAI_BASE_URL": "http://localhost:11434/v1"}, None),
])
def test_credentials_name_the_missing_setting(provider: str, env: dict[str, str],
                                              missing: str | None) -> None:
    assert credentials(provider, env) == missing


def test_credentials_of_an_unknown_provider_is_an_error() -> None:
    with pytest.raises(AgentError, match="unknown model provider 'google'"):
        credentials("google", {})


def test_providers_held() -> None:
    assert providers_held({}) == frozenset()
    assert providers_held({"ANTHROPIC_API_KEY": "k", "OPENAI_BASE_URL": "http://x/v1"}) == \
        {"anthropic", "openai-chat"}
    everything = {"ANTHROPIC_API_KEY": "k", "OPENAI_API_KEY": "k", "OPENAI_BASE_URL": "u"}
    assert providers_held(everything) == set(PROVIDERS)


def test_the_youtube_examples_models_resolve() -> None:
    vault = load_vault(EXAMPLES / "youtube")
    agents = {n: s for n, s in vault.skills.items() if s.manifest.kind == "instructions"}
    assert {"content-analyzer", "blog-post-writer", "text-summarizer"} <= set(agents)
    for skill in agents.values():
        m = skill.manifest
        assert effective_model(m.model, m.model_override, None).provider == "anthropic"
    # text-summarizer pins its small model: a daemon default does not replace it.
    m = vault.skills["text-summarizer"].manifest
    assert effective_model(m.model, m.model_override, "openai:gpt-4.1").name == m.model


@pytest.mark.parametrize(("spec", "class_name"), [
    ("anthropic:claude-haiku-4-5", "AnthropicModel"),
    ("openai:gpt-4.1", "OpenAIResponsesModel"),
    ("openai-chat:llama3", "OpenAIChatModel"),
])
def test_pydantic_ai_reads_the_string_as_meant(spec: str, class_name: str,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The API each provider name stands for is Pydantic AI's reading of it, checked
    here so an upgrade that changes it fails a test rather than a run."""
    from pydantic_ai.models import infer_model  # a dev dependency: never skipped

    monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    model = infer_model(resolve(spec).pydantic_ai_string)
    assert type(model).__name__ == class_name


def test_provider_credentials_come_from_the_environment_or_skillq_secrets(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from workers.agent.models import provider_env, providers_held

    secrets = tmp_path / "secrets.toml"
    secrets.write_text('openai_api_key = "sk-stored"\nanthropic_api_key = "sk-ant-stored"\n')
    secrets.chmod(0o600)
    monkeypatch.setenv("SKILLQ_SECRETS_FILE", str(secrets))
    found = provider_env({"ANTHROPIC_API_KEY": "sk-ant-env"})
    assert found["ANTHROPIC_API_KEY"] == "sk-ant-env"  # the provider's own variable wins
    assert found["OPENAI_API_KEY"] == "sk-stored"
    assert providers_held(found) == {"anthropic", "openai"}
    monkeypatch.setenv("SKILLQ_SECRETS_FILE", str(tmp_path / "none.toml"))
    assert provider_env({"SKILLQ_SECRET_OPENAI_BASE_URL": "http://127.0.0.1:1/v1"}) == {
        "OPENAI_BASE_URL": "http://127.0.0.1:1/v1"}
