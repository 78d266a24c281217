"""Which credentials a daemon holds for the model providers, read from its environment.

The model names themselves (``resolve``, ``effective_model``) are parsed in
shared/model_spec.py, where validation and routing read them too; they are re-exported
here for the executor. Credentials are the providers' own variables, read where the step
runs; a worker never ships them anywhere, and a daemon announces only which providers it
could serve.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

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

__all__ = ["AGENT_MODEL_SETTING", "FORMS", "PROVIDERS", "PROVIDER_VARIABLES", "ModelRef",
           "credentials", "effective_model", "provider_env", "providers_held", "resolve",
           "use_stored_credentials"]


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
