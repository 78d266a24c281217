"""From a step's final failure to a diagnosis and a suggested fix, for an improvement note.

The failure class comes from the step record (``error_kind``, exit code, error text), so
the same failure always gets the same diagnosis: a note is one per (skill, version,
step, diagnosis), and repeats of it count up instead of piling up.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum


class Kind(StrEnum):
    TIMEOUT = "timeout"
    TRANSIENT_EXHAUSTED = "transient_exhausted"
    BAD_OUTPUT = "bad_output"
    MISSING_DEPENDENCY = "missing_dependency"
    CHANGED_FILES = "changed_files"
    KILLED = "killed"
    NONZERO_EXIT = "nonzero_exit"
    LOST = "lost"
    INTERNAL = "internal"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class Failure:
    """What the step record says about the attempt that failed for good."""

    error_kind: str | None
    error: str | None
    exit_code: int | None = None
    timeout_s: float | None = None
    retries: int | None = None


@dataclass(frozen=True, slots=True)
class Diagnosis:
    kind: Kind
    summary: str
    suggested_fix: str


# Signs that the command or something it needs is not installed on the worker.
_MISSING = re.compile(
    r"command not found|not found: |No such file or directory|ModuleNotFoundError|"
    r"No module named|cannot find module|ImportError|error while loading shared librar",
    re.IGNORECASE)
_MODULE = re.compile(r"No module named '?([\w.]+)'?")
_COMMAND = re.compile(r"(?:^|: )([\w.+-]+): (?:command )?not found")

# error_kind values the executor and runner record that are not a script's own exit.
_NOT_INSTALLED = {
    "missing_secret": ("the worker lacks a secret the skill declares in `auth`",
                       "give the worker the secret: `skillq secrets set NAME` on that "
                       "machine, or SKILLQ_SECRET_NAME in the worker's environment"),
    "missing_skill": ("the worker's vault does not have this skill",
                      "sync the vault to every worker that serves this queue, or start the "
                      "worker with SKILLQ_VAULT pointing at the vault"),
    "version_mismatch": ("the worker's vault holds another version of this skill",
                         "sync the vault to the workers so every machine runs the version "
                         "that was planned"),
    "no_executor": ("no executor on this deployment can run an instruction-only skill",
                    "give the skill a `run` command, or start a worker for its approach"),
    "version_not_published": ("the run wants a version of the skill that was never "
                              "published", "publish it (`skillq publish NAME`) or pin a "
                              "published version (`skillq versions NAME` lists them)"),
}


def first_line(text: str | None, limit: int = 200) -> str:
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()[:limit]
    return ""


def _missing_dependency(failure: Failure) -> Diagnosis | None:
    kind = failure.error_kind or ""
    if kind in _NOT_INSTALLED:
        summary, fix = _NOT_INSTALLED[kind]
        return Diagnosis(Kind.MISSING_DEPENDENCY, f"{summary}: {first_line(failure.error)}",
                         fix)
    error = failure.error or ""
    cannot_start = failure.exit_code is None and error.startswith("cannot start")
    if failure.exit_code != 127 and not cannot_start and not _MISSING.search(error):
        return None
    if module := _MODULE.search(error):
        what = f"the Python module '{module.group(1)}'"
        fix = (f"install {module.group(1)} where the workers run (or vendor it in the skill "
               "folder), and list it in requires.software so routing picks a machine "
               "that has it")
    else:
        command = _COMMAND.search(error)
        what = f"the command '{command.group(1)}'" if command else "a program or file"
        fix = ("install it on the workers that serve this queue and declare it in "
               "requires.software (so only machines that have it take the step), or fix "
               "the path in run.command")
    return Diagnosis(Kind.MISSING_DEPENDENCY,
                     f"{what} the step needs is missing on the worker: {first_line(error)}",
                     fix)


def diagnose(failure: Failure) -> Diagnosis:
    """The failure class and a fix a person can act on; never reads the skill's files."""
    kind = failure.error_kind or ""
    detail = first_line(failure.error)
    if kind == "timeout":
        limit = f" ({failure.timeout_s:g} s)" if failure.timeout_s else ""
        return Diagnosis(
            Kind.TIMEOUT, f"the step ran past run.timeout{limit} and was killed",
            "raise run.timeout in the manifest if this input is legitimately slow; "
            "otherwise give the script's slow calls their own timeouts and fail with a "
            "message, or split the work into smaller steps")
    if kind == "transient_exhausted":
        tries = f" after {failure.retries} retries" if failure.retries is not None else ""
        return Diagnosis(
            Kind.TRANSIENT_EXHAUSTED,
            f"every attempt failed temporarily (exit 75){tries}: {detail}",
            "check the service the skill calls (rate limits, outages); raise run.retries "
            "if it recovers slowly, and exit 75 only for errors that can pass on retry")
    if kind in ("bad_output", "invalid_outputs"):
        return Diagnosis(
            Kind.BAD_OUTPUT, f"the script exited 0 but its outputs break the contract: "
            f"{detail}",
            "make the script write a JSON object with every declared output, of its "
            "declared type, to $SKILL_OUTPUT; or correct `outputs` in the manifest")
    if kind == "lost":
        return Diagnosis(
            Kind.LOST, f"the worker running the step died repeatedly: {detail}",
            "look for the step exhausting the machine's memory or crashing the worker "
            "(worker logs, dmesg for the OOM killer); set limits or route the skill to a "
            "larger machine with requires")
    if kind == "folder_changed":
        return Diagnosis(
            Kind.CHANGED_FILES, f"the skill's files differ from its published version: "
            f"{detail}",
            "publish the edits after testing them (`skillq publish NAME`), or restore the "
            "published files (`skillq rollback NAME --to N --force`); the error names each "
            "changed file")
    if kind == "internal":
        return Diagnosis(Kind.INTERNAL, f"skillq itself failed running the step: {detail}",
                         "this is a skillq bug, not the skill's: report it with the run id")
    if found := _missing_dependency(failure):
        return found
    code = failure.exit_code
    if code is not None and code < 0:
        return Diagnosis(
            Kind.KILLED, f"the script was killed by signal {-code}: {detail}",
            "a SIGKILL usually means the out-of-memory killer: reduce the memory the "
            "script needs, or route it to a machine with more")
    if kind == "failed" or code not in (None, 0):
        return Diagnosis(
            Kind.NONZERO_EXIT, f"the script exited with code {code}: {detail}",
            "reproduce it with the note's inputs (`skillq run SKILL --inputs-file`), then "
            "handle this case in the script: fail with a clear message for bad input, or "
            "exit 75 when a retry could succeed")
    return Diagnosis(Kind.UNKNOWN, f"the step failed ({kind or 'no class'}): {detail}",
                     "read the step's record (`skillq run-show RUN`) and its stderr tail")
