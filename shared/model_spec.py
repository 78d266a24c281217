"""Model names for agent steps: which provider a model string means, and which model a
step runs on. Pure parsing, shared by validation, routing and the agent executor.

A model is written ``provider:name``, Pydantic AI's own form, for the three providers
skillq speaks: ``anthropic`` (Messages API), ``openai`` (Responses API) and
``openai-chat`` (Chat Completions, the API every OpenAI-compatible server offers: Ollama,
vLLM, llama.cpp). The seed's bare names (``claude-haiku-4-5-20251001``) keep working:
their prefix says whose they are.

Which credentials a daemon holds is read on the daemon itself (workers/agent/models.py);
routing sees only the provider names it announced.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from shared.errors import AgentError

PROVIDERS = ("anthropic", "openai", "openai-chat")

# What each provider needs to be usable at all; the name is what a refusal prints.
# openai-chat needs a server address rather than a key: local servers take none.
REQUIRED_VARIABLE = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY",
                     "openai-chat": "OPENAI_BASE_URL"}
# Every variable the providers' clients read: none of them belongs in a step's own
# processes (bash), and all of them are redacted from transcripts.
PROVIDER_VARIABLES = frozenset({"ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY",
                                "OPENAI_BASE_URL"})

_BARE = ((re.compile(r"claude-\S+\Z"), "anthropic"),
         (re.compile(r"gpt-\S+\Z"), "openai"),
         (re.compile(r"o[1-9][0-9]*([-.]\S*)?\Z"), "openai"))  # o1, o3-mini, o4-mini
FORMS = ("provider:name (anthropic:claude-haiku-4-5; openai:gpt-4.1 for the Responses "
         "API; openai-chat:NAME for any OpenAI-compatible Chat Completions server such as "
         "Ollama, vLLM or llama.cpp) or a bare claude-..., gpt-... or o1/o3/o4... name")
AGENT_MODEL_SETTING = "SKILLQ_AGENT_MODEL"
# Claude Code's model names that are not a model: `inherit` (the session's model) and the
# aliases of a family whose current model only Claude Code knows. A skill may keep one;
# its step runs on the model it would run on had it set none (effective_model).
CLAUDE_CODE_ALIASES = frozenset({"inherit", "default", "haiku", "sonnet", "opus", "opusplan",
                                 "sonnet[1m]", "opus[1m]"})


def is_claude_code_alias(spec: str) -> bool:
    return spec.strip().lower() in CLAUDE_CODE_ALIASES


def alias_note(spec: str) -> str:
    """What becomes of a skill's Claude Code model alias, for a warning or an error."""
    return (f"model '{spec}' is a Claude Code alias, not a model skillq can place: the step "
            f"runs on the daemon's model ({AGENT_MODEL_SETTING}) as if the skill set none; "
            "to pin one, write provider:name, e.g. model: anthropic:claude-haiku-4-5")


@dataclass(frozen=True, slots=True)
class ModelRef:
    provider: str  # one of PROVIDERS
    name: str  # the provider's own model name

    @property
    def pydantic_ai_string(self) -> str:
        """What ``pydantic_ai.Agent(model=...)`` takes."""
        return f"{self.provider}:{self.name}"

    def __str__(self) -> str:
        return self.pydantic_ai_string


def resolve(spec: str, *, where: str | None = None) -> ModelRef:
    """``spec`` as a model of a known provider; AgentError naming it and the accepted
    forms otherwise. ``where`` says where the value came from, for that message."""
    text = spec.strip()
    prefix = f"{where}: " if where else ""
    provider, sep, name = text.partition(":")
    if sep:
        if provider not in PROVIDERS:
            close = difflib.get_close_matches(provider, PROVIDERS, n=1)
            hint = f"did you mean '{close[0]}:{name}'? " if close else ""
            raise AgentError(f"{prefix}model '{spec}' names an unknown provider "
                             f"'{provider}'; {hint}write {FORMS}")
        if not name or any(c.isspace() for c in name):
            raise AgentError(f"{prefix}model '{spec}' has no model name after "
                             f"'{provider}:'; write {FORMS}")
        return ModelRef(provider, name)
    for pattern, owner in _BARE:
        if pattern.match(text):
            return ModelRef(owner, text)
    raise AgentError(f"{prefix}model '{spec}' is not one skillq can place with a provider; "
                     f"write {FORMS}")


def effective_model(manifest_model: str | None, model_override: bool,
                    daemon_default: str | None, requested: str | None = None) -> ModelRef:
    """The model a step runs on, first match wins:

    1. the skill's ``model`` when it sets ``model_override: true`` (seed 2.2: its author
       pinned it, e.g. a prompt tuned for one model, whatever the daemon prefers);
    2. ``requested``: the model an ``execute_skill`` call asked for;
    3. the daemon's default (SKILLQ_AGENT_MODEL);
    4. the skill's ``model``.

    AgentError when none is set, naming the setting to fix that. A skill's Claude Code
    alias (``sonnet``, ``inherit``) counts as no model.
    """
    alias = manifest_model if manifest_model and is_claude_code_alias(manifest_model) else None
    if alias:
        manifest_model = None
    if model_override and manifest_model:
        return resolve(manifest_model, where="the skill's model")
    if requested:
        return resolve(requested, where="execute_skill's model")
    if daemon_default:
        return resolve(daemon_default, where=AGENT_MODEL_SETTING)
    if manifest_model:
        return resolve(manifest_model, where="the skill's model")
    sets = f"the skill's model '{alias}' is a Claude Code alias, which names no model " \
        "skillq can place," if alias else "the skill sets no model"
    raise AgentError(f"no model for this agent step: {sets} and this "
                     f"daemon has no default; set {AGENT_MODEL_SETTING} (e.g. "
                     f"anthropic:claude-haiku-4-5) or the skill's model field")
