"""The host side of a screen step: the process that drives the browser or the desktop.

The worker runs ``python -I -m workers.dom0.host`` (or ``workers.cmd0.host``) through the
script executor, so a screen step keeps every guarantee of the script protocol: its own
session and scrubbed environment, a timeout that kills everything, outputs validated
against the manifest. The worker hands over a spec (``SKILLQ_SCREEN_SPEC``: the resolved
actions and settings, in a private folder; secrets by name only, their values come
through the environment, shared/screen_secrets.py); the host writes its outputs to
``SKILL_OUTPUT``, screenshots as files beside the spec (the worker moves them into the
shared store), the action it is on to ``progress``, and a failure's one-line reason to
``error``.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from shared.secrets import redact, redact_value

SPEC_VAR = "SKILLQ_SCREEN_SPEC"
ARTIFACT_KEY = "$artifact"
EXIT_FAILED = 1
_MAGIC = ((b"\x89PNG\r\n\x1a\n", "image/png"), (b"\xff\xd8\xff", "image/jpeg"))


class HostError(Exception):
    """A failure said in one line: what failed and why (no traceback for the user)."""


def action_error(field: str, index: int, kind: str, detail: str,
                 target: str | None = None) -> HostError:
    """``browser.actions[3] (click '#send') failed: ...``: the field, the action, its
    selector or image, as the manifest spells them."""
    what = f"{kind} {target!r}" if target else kind
    return HostError(f"{field}.actions[{index}] ({what}) failed: {detail}")


@dataclass(frozen=True)
class Workspace:
    """The private folder the worker made for this step (the spec's folder)."""

    root: Path

    @property
    def spec(self) -> Path:
        return self.root / "spec.json"

    @property
    def error(self) -> Path:
        return self.root / "error"

    @property
    def progress(self) -> Path:
        return self.root / "progress"

    @property
    def artifacts(self) -> Path:
        return self.root / "artifacts"

    def doing(self, text: str) -> None:
        """Note the action under way: a timeout's error names it."""
        self.progress.write_text(text)

    def save(self, data: bytes, media_type: str) -> dict[str, str]:
        """Keep ``data`` for the shared store; the output value that refers to it."""
        self.artifacts.mkdir(exist_ok=True)
        name = f"{len(list(self.artifacts.iterdir()))}.bin"
        (self.artifacts / name).write_bytes(data)
        return {ARTIFACT_KEY: name, "media_type": media_type}


Secrets = Mapping[str, str]  # a declared secret's name -> its value, in memory only
Runner = Callable[[dict[str, Any], dict[str, Any], Workspace, Secrets], dict[str, Any]]


def take_secrets(names: list[str], *, keep_in_env: bool) -> dict[str, str]:
    """The declared secrets' values, from this process's environment (where the script
    executor put them, as NAME upper-cased; never in the spec file). Unless a script
    of the skill's is to read them there (``keep_in_env``), they leave the environment
    at once: the browser and Playwright's driver, started later, never inherit them."""
    found = {}
    for name in names:
        value = os.environ.get(name.upper()) if keep_in_env else \
            os.environ.pop(name.upper(), None)
        if value is not None:
            found[name] = value
    return found


def main(run: Runner) -> None:
    """Read the spec and the inputs, ``run`` them, write the outputs; exit 1 with a
    one-line reason on stderr (and in ``error``) when it fails. A secret's value is
    replaced by *** in all of it: the error file and the outputs are in the step's
    folders, and stderr goes to the step's record."""
    workspace = Workspace(Path(os.environ[SPEC_VAR]).parent)
    spec = json.loads(workspace.spec.read_text())
    inputs = json.loads(Path(os.environ["SKILL_INPUTS"]).read_text())
    secrets = take_secrets(spec.get("secrets") or [], keep_in_env=bool(spec.get("script")))
    try:
        outputs = run(spec, inputs, workspace, secrets)
    except HostError as exc:
        _fail(workspace, str(exc), secrets)
    except ModuleNotFoundError as exc:
        _fail(workspace, f"{exc.name} is not installed on this worker: pip install "
              "'skillq[screen]'", secrets)
    except Exception as exc:  # a bug or an unforeseen library error: keep the trace too
        print(redact(traceback.format_exc(), secrets), file=sys.stderr, end="")
        _fail(workspace, f"{type(exc).__name__}: {exc}".splitlines()[0], secrets)
    Path(os.environ["SKILL_OUTPUT"]).write_text(json.dumps(_redacted(outputs, secrets)))


def _redacted(outputs: dict[str, Any], secrets: Secrets) -> dict[str, Any]:
    """The outputs as the worker records them (a page that echoes a secret, say), before
    they reach the step's folder; a screenshot's marker names a file here: kept as is."""
    if not secrets:
        return outputs
    files = {k: v for k, v in outputs.items()
             if isinstance(v, dict) and set(v) == {ARTIFACT_KEY, "media_type"}}
    others = redact_value({k: v for k, v in outputs.items() if k not in files}, secrets)
    return {**others, **files}


def _fail(workspace: Workspace, message: str, secrets: Secrets) -> NoReturn:
    message = redact(message, secrets)
    workspace.error.write_text(message)
    print(message, file=sys.stderr, flush=True)
    sys.exit(EXIT_FAILED)


def media_type(data: bytes) -> str:
    return next((kind for magic, kind in _MAGIC if data.startswith(magic)),
                "application/octet-stream")


def first_line(exc: BaseException) -> str:
    """A library error's first line (Playwright's carry a long call log after it)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
