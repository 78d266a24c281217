"""Which credentials a daemon holds for the model providers, read from its environment.

The model names themselves (``resolve``, ``effective_model``) are parsed in
shared/model_spec.py, where validation and routing read them too; they are re-exported
here for the executor. Credentials are the providers' own variables, read where the step
runs; a worker never ships them anywhere, and a daemon announces only which providers it
could serve.

``model_for`` is the executor's Pydantic AI model, built once and kept (see there).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING

from shared.errors import AgentError
from shared.model_spec import (
    AGENT_MODEL_SETTING,
    FORMS,
    PROVIDER_VARIABLES,
    PROVIDERS,
    REQUIRED_VARIABLE,
    ModelRef,
    effective_model,
    resolve,
)
from shared.secrets import values_for

if TYPE_CHECKING:
    from pydantic_ai.models import Model

__all__ = ["AGENT_MODEL_SETTING", "FORMS", "PROVIDERS", "PROVIDER_VARIABLES",
           "MissingCredentials", "ModelRef", "credentials", "effective_model", "model_for",
           "provider_env", "providers_held", "resolve", "use_stored_credentials"]

_VARIABLES = tuple(sorted(PROVIDER_VARIABLES))
# The models built, by process, thread, model and the providers' variables they were
# built with: see model_for.
_models: dict[tuple[int, int, str, tuple[str | None, ...]], Model] = {}


class MissingCredentials(Exception):
    """The step's provider lacks the variable named by ``variable``."""

    def __init__(self, variable: str) -> None:
        super().__init__(variable)
        self.variable = variable


def provider_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The providers' variables this worker has: from its environment, else from a skillq
    secret of the same name in lower case (`skillq secrets set anthropic_api_key`)."""
    env = os.environ if environ is None else environ
    found = {v: env[v] for v in PROVIDER_VARIABLES if env.get(v, "").strip()}
    missing = sorted(PROVIDER_VARIABLES - set(found))
    stored = values_for([v.lower() for v in missing], env)
    found.update({v: stored[v.lower()] for v in missing if stored.get(v.lower(), "").strip()})
    return found


def use_stored_credentials() -> None:
    """Put stored credentials where the providers' SDKs read them: this process's own
    environment (a step's environment is built afresh and never holds them)."""
    for name, value in provider_env().items():
        os.environ.setdefault(name, value)


def credentials(provider: str, env: Mapping[str, str]) -> str | None:
    """The variable ``provider`` lacks in ``env`` (an empty value is unset), or None when
    it is usable."""
    try:
        needed = REQUIRED_VARIABLE[provider]
    except KeyError:
        raise AgentError(f"unknown model provider '{provider}'; skillq speaks "
                         f"{', '.join(PROVIDERS)}") from None
    return None if env.get(needed, "").strip() else needed


def providers_held(env: Mapping[str, str]) -> frozenset[str]:
    """The providers this daemon could serve, for its announcement."""
    return frozenset(p for p in PROVIDERS if credentials(p, env) is None)


def _model_key(ref: ModelRef) -> tuple[int, int, str, tuple[str | None, ...]]:
    return (os.getpid(), threading.get_ident(), ref.pydantic_ai_string,
            tuple(os.environ.get(v) for v in _VARIABLES))


def model_for(ref: ModelRef) -> Model:
    """The Pydantic AI model for ``ref``, built at its first step and kept for the next:
    building one makes a new provider and HTTP client (whose TLS set-up reads the CA
    bundle). Kept per process (a forked pool process builds its own) and per thread (a
    thread pool runs steps on loops of their own, and a client's connections belong to
    the loop that opened them); a change to the providers' variables builds anew.

    The credentials are looked up (the environment, then stored secrets) only when it is
    built: what they put in the environment stays there, so a kept model is one whose
    variables are still set. MissingCredentials when its provider lacks one."""
    model = _models.get(_model_key(ref))
    if model is None:
        use_stored_credentials()
        missing = credentials(ref.provider, os.environ)
        if missing:
            raise MissingCredentials(missing)
        # imported here: a daemon's announcement (announce.py) reads this module too
        from pydantic_ai.models import infer_model

        model = _models[_model_key(ref)] = infer_model(ref.pydantic_ai_string)
    return model
