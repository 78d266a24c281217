"""skillq-check: a test case's checker script, run on a run's outputs (SKILL.md here;
docs/eval-scripts.md is the checker's protocol).

Standalone (the standard library only): it runs as a script step, in the step's sandbox,
by the script protocol (docs/script-protocol.md). The checker runs inside that same
sandbox, as a child of this script: no secrets, no network, nothing of the skill's folder
but its own copy. Exit 0 passes, any other exit fails; what it printed is the evidence.
A checker that cannot start, or runs over TIMEOUT_S, fails this step instead, with why.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

TIMEOUT_S = 60  # the step's own timeout (SKILL.md) leaves room to report it
SAID_CHARS = 500  # what the verdict keeps of what the checker printed: its end
READ_BYTES = 8 * 1024  # read of its printout: enough for SAID_CHARS of any UTF-8
# The checker's interpreter, by its file's extension; `.py` is this interpreter (the
# worker's, as `python` is for a script step: workers/interpreters.py).
BY_SUFFIX = {".sh": ("bash",), ".bash": ("bash",), ".js": ("node",), ".mjs": ("node",),
             ".cjs": ("node",), ".ts": ("tsx",), ".rb": ("ruby",), ".pl": ("perl",),
             ".php": ("php",), ".R": ("Rscript",), ".r": ("Rscript",), ".jl": ("julia",),
             ".lua": ("lua",)}
# This step's own protocol: not the checker's to see (it might write this step's outputs)
PROTOCOL_VARS = ("SKILL_INPUTS", "SKILL_OUTPUT", "SKILLQ_WORKDIR")


class CannotRun(Exception):
    """The checker could not be run: this step fails with the message."""


def interpreter(checker: Path) -> list[str]:
    """The program that runs ``checker``: by its extension, else its ``#!`` line."""
    if checker.suffix.lower() == ".py":
        return [sys.executable]
    if checker.suffix in BY_SUFFIX or checker.suffix.lower() in BY_SUFFIX:
        return list(BY_SUFFIX.get(checker.suffix) or BY_SUFFIX[checker.suffix.lower()])
    with checker.open("rb") as fh:
        first = fh.readline(512).decode("utf-8", "replace").strip()
    if first.startswith("#!") and (line := shlex.split(first[2:])):
        return line
    raise CannotRun(f"no interpreter for the checker {checker.name}: give it one of the "
                    f"extensions .py, {', '.join(BY_SUFFIX)}, or a #! line")


def said(path: Path) -> str:
    """The end of what the checker printed, SAID_CHARS at most."""
    with path.open("rb") as fh:
        size = fh.seek(0, os.SEEK_END)
        fh.seek(max(0, size - READ_BYTES))
        text = fh.read().decode("utf-8", "replace").replace("\x00", "\ufffd").strip()
    return text if len(text) <= SAID_CHARS and size <= READ_BYTES \
        else "…" + text[-(SAID_CHARS - 1):]


def run_checker(checker: Path, case_inputs: object, outputs: object, scratch: Path
                ) -> tuple[int, str]:
    """Run the checker: its exit code and what it printed."""
    case = scratch / "case.json"
    case.write_text(json.dumps({"inputs": case_inputs, "outputs": outputs},
                               ensure_ascii=False), encoding="utf-8")
    given = scratch / "outputs.json"
    given.write_text(json.dumps(outputs, ensure_ascii=False), encoding="utf-8")
    printed = scratch / "said.txt"
    argv = [*interpreter(checker), str(checker), str(case)]
    env = {k: v for k, v in os.environ.items() if k not in PROTOCOL_VARS}
    # Files, not pipes: nothing the checker leaves running can hold this step up.
    with given.open("rb") as stdin, printed.open("wb") as out:
        try:
            proc = subprocess.Popen(argv, stdin=stdin, stdout=out, stderr=subprocess.STDOUT,
                                    cwd=checker.parent, env=env, start_new_session=True)
        except OSError as exc:
            raise CannotRun(f"cannot start {argv[0]!r} for the checker {checker.name}: "
                            f"{exc.strerror or exc}") from None
        try:
            code = proc.wait(TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise CannotRun(f"the checker {checker.name} ran over {TIMEOUT_S} s and was "
                            "stopped") from None
        finally:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)  # what it started ends with it
            proc.wait()
    return code, said(printed)


def main() -> int:
    inputs_file = Path(os.environ["SKILL_INPUTS"])
    given = json.loads(inputs_file.read_text(encoding="utf-8"))
    checker = Path(given["checker"])
    try:
        try:
            outputs = json.loads(given["outputs"])
            case_inputs = json.loads(given.get("case_inputs") or "{}")
        except ValueError as exc:
            raise CannotRun(f"outputs or case_inputs are not JSON: {exc}") from None
        code, text = run_checker(checker, case_inputs, outputs, inputs_file.parent)
    except CannotRun as exc:
        print(exc, file=sys.stderr)
        return 1
    result = {"passed": code == 0, "exit_code": code, "said": text}
    out = Path(os.environ["SKILL_OUTPUT"])
    out.unlink(missing_ok=True)  # whatever the checker may have put there, not followed
    out.write_text(json.dumps(result, ensure_ascii=False), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
