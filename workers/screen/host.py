"""The host side of a screen step: the process that drives the browser or the desktop.

The worker runs ``python -I -m workers.dom0.host`` (or ``workers.cmd0.host``) through the
script executor, so a screen step keeps every guarantee of the script protocol: its own
session and scrubbed environment, a timeout that kills everything, outputs validated
against the manifest. The worker hands over a spec (``SKILLQ_SCREEN_SPEC``: the resolved
actions and settings, in a private folder); the host writes its outputs to
``SKILL_OUTPUT``, screenshots as files beside the spec (the worker moves them into the
shared store), the action it is on to ``progress``, and a failure's one-line reason to
``error``.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

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


Runner = Callable[[dict[str, Any], dict[str, Any], Workspace], dict[str, Any]]


def main(run: Runner) -> None:
    """Read the spec and the inputs, ``run`` them, write the outputs; exit 1 with a
    one-line reason on stderr (and in ``error``) when it fails."""
    workspace = Workspace(Path(os.environ[SPEC_VAR]).parent)
    spec = json.loads(workspace.spec.read_text())
    inputs = json.loads(Path(os.environ["SKILL_INPUTS"]).read_text())
    try:
        outputs = run(spec, inputs, workspace)
    except HostError as exc:
        _fail(workspace, str(exc))
    except ModuleNotFoundError as exc:
        _fail(workspace, f"{exc.name} is not installed on this worker: pip install "
              "'skillq[screen]'")
    except Exception as exc:  # a bug or an unforeseen library error: keep the trace too
        traceback.print_exc()
        _fail(workspace, f"{type(exc).__name__}: {exc}".splitlines()[0])
    Path(os.environ["SKILL_OUTPUT"]).write_text(json.dumps(outputs))


def _fail(workspace: Workspace, message: str) -> NoReturn:
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
