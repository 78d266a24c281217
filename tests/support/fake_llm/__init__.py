"""A fake LLM: a local HTTP server speaking the providers' real wire formats (Anthropic
Messages, OpenAI Chat Completions and Responses), answering from a script, so tests run
the real SDKs and Pydantic AI without a paid API. docs/agent-steps.md says how to use it;
script.py says what a turn is."""

from .client import FakeLLM, FakeLLMClient, FakeLLMProcess
from .script import DEFAULT_KEY, Script, conversation_key, marker

__all__ = [
    "DEFAULT_KEY",
    "FakeLLM",
    "FakeLLMClient",
    "FakeLLMProcess",
    "Script",
    "conversation_key",
    "marker",
]
