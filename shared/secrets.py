"""The secret provider: the secrets a skill declares in `auth`, and only those.

Two sources, looked up in this order:

1. the worker's environment: a secret named ``youtube_api_key`` is read from
   ``SKILLQ_SECRET_YOUTUBE_API_KEY``;
2. the secrets file, ``$SKILLQ_HOME/secrets.toml`` (or ``SKILLQ_SECRETS_FILE``): one
   ``name = "value"`` line per secret, owner-only (mode 0600). A file that group or
   others could read is refused, naming the file and the ``chmod 600`` fix.

A declared secret reaches the skill's process as ``YOUTUBE_API_KEY`` (the name
upper-cased); nothing else of the worker's environment does (workers/script_executor.py).
"""

from __future__ import annotations

import os
import stat
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from shared.atomic import write_text
from shared.errors import MissingSecret, SecretsFileError

__all__ = ["MissingSecret", "SecretsFileError", "redact", "secrets_for"]

PREFIX = "SKILLQ_SECRET_"
SECRETS_FILE = "secrets.toml"
REDACTED = "***"


def env_name(name: str) -> str:
    return f"{PREFIX}{name.upper()}"


def default_file(home: Path) -> Path:
    return home.expanduser() / SECRETS_FILE


def _settings_file() -> Path:
    from shared.settings import get_settings  # read when needed, never at import

    settings = get_settings()
    return settings.secrets_file or default_file(settings.home)


def check_private(path: Path) -> None:
    """Refuse a secrets file that anyone but its owner could read or change."""
    mode = path.stat().st_mode
    if not stat.S_ISREG(mode):
        raise SecretsFileError(f"secrets file {path} is not a regular file")
    if mode & 0o077:
        raise SecretsFileError(
            f"secrets file {path} is accessible to group/others (mode "
            f"{stat.S_IMODE(mode):04o}); run `chmod 600 {path}`")


def read_file(path: Path) -> dict[str, str]:
    """The secrets in ``path`` ({} when it does not exist); SecretsFileError when unsafe
    or malformed."""
    try:
        check_private(path)
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise SecretsFileError(f"cannot read secrets file {path}: {exc.strerror}") from None
    try:
        data: dict[str, Any] = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        # The parser's message quotes no values, only positions.
        raise SecretsFileError(f"secrets file {path} is not valid TOML ({exc}); write one "
                               '`name = "value"` line per secret') from None
    bad = sorted(k for k, v in data.items() if not isinstance(v, str))
    if bad:
        raise SecretsFileError(f"secrets file {path}: {', '.join(bad)}: a secret must be "
                               'a string (`name = "value"`)')
    return data


def secrets_for(auth: Iterable[str], environ: Mapping[str, str] | None = None,
                file: Path | None = None) -> dict[str, str]:
    """The declared secrets' values by name; MissingSecret naming any not found (or the
    reason the secrets file could not be used)."""
    names = list(auth)
    if not names:
        return {}
    env = os.environ if environ is None else environ
    found = {n: env[env_name(n)] for n in names if env_name(n) in env}
    if len(found) == len(names):
        return found
    path = file if file is not None else _settings_file()
    try:
        stored = read_file(path)
    except SecretsFileError as exc:
        raise MissingSecret([n for n in names if n not in found], str(exc)) from None
    found.update({n: stored[n] for n in names if n not in found and n in stored})
    missing = [n for n in names if n not in found]
    if missing:
        raise MissingSecret(missing)
    return found


def values_for(auth: Iterable[str], environ: Mapping[str, str] | None = None,
               file: Path | None = None) -> dict[str, str]:
    """Whichever declared secrets are available (for redaction: never raises for a
    missing or unusable source)."""
    found = {}
    for name in auth:
        try:
            found.update(secrets_for([name], environ, file))
        except MissingSecret:
            continue
    return found


def _toml_string(value: str) -> str:
    out = []
    for ch in value:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def store(path: Path, name: str, value: str) -> None:
    """Set one secret in the file (created 0600), keeping the others."""
    current = read_file(path)
    current[name] = value
    text = "".join(f"{k} = {_toml_string(v)}\n" for k, v in sorted(current.items()))
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # usually SKILLQ_HOME: private
    # private: mode 0600 from the temporary file's first byte, kept by the rename
    write_text(path, "# skillq secrets: keep this file mode 0600\n" + text, private=True)
    check_private(path)


def available_names(path: Path, environ: Mapping[str, str] | None = None
                    ) -> dict[str, str]:
    """Secret name -> where it comes from ("env" or the file), values never read out."""
    env = os.environ if environ is None else environ
    names = {k[len(PREFIX):].lower(): "env" for k in env if k.startswith(PREFIX)}
    for name in read_file(path):
        names.setdefault(name, str(path))
    return dict(sorted(names.items()))


def redact(text: str, secrets: Mapping[str, str]) -> str:
    """``text`` with every secret value replaced, before it is stored anywhere."""
    for value in sorted(secrets.values(), key=len, reverse=True):
        if value:
            text = text.replace(value, REDACTED)
    return text


def redact_value(value: Any, secrets: Mapping[str, str], declared: Iterable[str] = ()
                 ) -> Any:
    """A JSON value with every secret value inside its strings (and keys) replaced, and
    the value of any key named like a declared secret hidden whole."""
    names = frozenset(n.lower() for n in (*secrets, *declared))
    return _redact_in(value, secrets, names)


def _redact_in(value: Any, secrets: Mapping[str, str], names: frozenset[str]) -> Any:
    if isinstance(value, str):
        return redact(value, secrets)
    if isinstance(value, list):
        return [_redact_in(v, secrets, names) for v in value]
    if isinstance(value, dict):
        return {redact(str(k), secrets): REDACTED if str(k).lower() in names
                else _redact_in(v, secrets, names) for k, v in value.items()}
    return value
