"""Every error skillq raises on purpose, under one base class.

    SkillqError
     ├── NotFound               a name or id that nothing has (no exit code of its own:
     │    │                     each member keeps its own)
     │    ├── RunNotFound        a run id no record has
     │    ├── VersionNotPublished
     │    │                      a run wants a version that was never published
     │    └── SkillNotFound      (also a VaultError, below)
     ├── Refused                an operation refused by the state of what it names;
     │    │                     nothing changed (no exit code of its own)
     │    ├── RunRefused         cancel/retry of a run not in a state for it (ended, still
     │    │                      going, nested, succeeded)
     │    ├── PublishError       publish/rollback refused (tests failed, unpublished edits,
     │    │                      nothing to restore)
     │    ├── FolderChanged      a published skill's files differ from what was published
     │    ├── SkillDisabled      (also a LibraryError, below)
     │    └── HasDependents      (also a LibraryError, below)
     ├── ConfigError            settings or environment unusable (names the variable)
     │    ├── SecretsFileError   the secrets file is readable by others, or malformed
     │    ├── SandboxError       steps cannot be isolated as SKILLQ_SANDBOX asks
     │    ├── DaemonKeyError     this SKILLQ_HOME's daemon key is unusable (readable by
     │                           others, unreadable) or revoked
     │    └── ApiError           the local API (SKILLQ_HOME/api.json) refused this command
     │                           (token, Host) or broke off mid-request
     ├── VaultError             the vault folder itself cannot be read
     │    └── SkillNotFound      a name that no skill in the vault has (also a NotFound)
     ├── ValidationFailed       one or more skills are invalid (carries every Problem)
     ├── InputError             inputs given to a run do not fit the skill's declared inputs
     ├── NoWorker               no online daemon can run a step of the run (before dispatch)
     ├── DatabaseUnreachable    a client waited out SKILLQ_DATABASE_OUTAGE_S and gave up
     ├── PipelineFailed         a run aborted (names the step, the item, the error)
     ├── Relayed                a SkillqError the local API raised for `skillq run`: its
     │                          message and exit code, as the command itself would give
     ├── TestsFailed            `skillq test`: a case failed
     ├── ExportError            a skill cannot be written in the requested on-disk form
     ├── LibraryError           a library change refused (pins full, bad label, unknown skill)
     │    ├── SkillDisabled      a disabled skill (or a disabled callee) was asked to run
     │    │                      (also a Refused)
     │    └── HasDependents      delete/disable would break the skills that refer to it
     │                           (also a Refused)
     ├── ArchiveError           a vault archive cannot be written, read or imported
     ├── MissingSecret          a skill declares a secret this worker cannot provide
     ├── TestCaseError          `skillq test`: no such case, or a skill without cases
     ├── NoteError              `skillq notes`: no such note, or a status change refused
     ├── BuildError             `skillq build`/`plans`/`plan`: no such build, a task left
     │                          empty, a draft that cannot land in the vault
     ├── WaitError              `skillq answer/approve/reject`: no such open wait in the
     │                          run, or an answer that does not fit it (a choice out of
     │                          range, text where only choices are taken, an input's type)
     ├── ScheduleError          `skillq schedule`/`beat`: no such schedule, lock lost
     │    └── CronError         a cron line or time zone that cannot be used
     ├── DashboardError         `skillq dashboard` refused to start (unsafe bind, bad auth)
     ├── BadCursor              a dashboard page cursor that cannot be read
     ├── ArtifactError          `skillq artifact get`: no such key in the shared store, a
     │                          reference that is not one, nowhere to write the bytes
     ├── StepFailed             a step message's attempt failed (the Celery task's FAILURE)
     ├── AgentError             an agent step cannot be set up: an unknown model, no model
     │                          configured, a provider's credentials missing
     ├── KeyRegistryError       `skillq daemons enroll/revoke`: not a public key, no such
     │                          key or daemon, a revoked key enrolled again
     ├── MessageRefused         a worker refused a task message (unsigned, unknown or revoked
     │                          key, bad signature, expired, replayed): discarded, not run
     └── IllegalTransition      a run, step or step-progress change the tables in shared/states.py
                                forbid (a bug, or a stale redelivery): never written

NotFound and Refused are families to catch (``except NotFound``: the local API's 404);
a class that is also another's (SkillNotFound a VaultError) has both bases, the older
first so that its exit code stays. A class whose errors mix "no such X" with other
refusals (TestCaseError, NoteError, WaitError, ScheduleError, ArtifactError, KeyRegistryError,
LibraryError) is in neither; nor are MessageRefused (a worker's message gate, never a
user's operation) and IllegalTransition (a bug signal). tests/unit/test_errors.py pins
every exit code.

Control-flow signals (retry, skip an item) are not errors and do not live here.
The CLI turns any SkillqError into a message and an exit code, never a traceback.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from shared.problems import Problem

if TYPE_CHECKING:  # every command imports this module: keep `skillq --help` light
    from shared.folderhash import Change


class SkillqError(Exception):
    """Base of every error skillq raises on purpose."""

    exit_code: int = 1


class NotFound(SkillqError):
    """A name or id that nothing has: catch this for "no such thing" in any family.

    No exit code of its own: a member keeps the one it had (SkillNotFound 2, as a
    VaultError; RunNotFound 1). Only classes that mean nothing else are members: one
    that also refuses for other reasons (NoteError, ScheduleError, ArtifactError,
    TestCaseError, KeyRegistryError) stays outside."""


class Refused(SkillqError):
    """An operation refused because of the state of what it names (a run ended, a skill
    disabled or referred to, a folder that differs from what was published): nothing was
    changed. No exit code of its own: a member keeps the one it had."""


class ConfigError(SkillqError):
    exit_code = 2


class SandboxError(ConfigError):
    """Names what is missing (bubblewrap, user namespaces) and the setting that decides."""


class DaemonKeyError(ConfigError):
    """Names the key file (or its fingerprint) and the fix; never prints the key."""


class KeyRegistryError(SkillqError):
    exit_code = 2


class MessageRefused(SkillqError):
    """Why a worker refused a task message, and whose key it named (if it named one).

    Raised and caught inside the worker's message gate (shared/signed_messages.py), which
    logs it as one line and discards the message; it never reaches a task."""

    def __init__(self, reason: str, *, key: str | None = None,
                 daemon: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.key = key
        self.daemon = daemon


class VaultError(SkillqError):
    exit_code = 2


class SkillNotFound(VaultError, NotFound):
    def __init__(self, name: str, vault: str, suggestion: str | None = None) -> None:
        hint = f"; did you mean '{suggestion}'?" if suggestion else "; `skillq list` shows them"
        super().__init__(f"no skill named '{name}' in vault {vault}{hint}")
        self.name = name


class ValidationFailed(SkillqError):
    def __init__(self, problems: Iterable[Problem]) -> None:
        self.problems = sorted(problems, key=Problem.sort_key)
        super().__init__("\n".join(str(p) for p in self.problems))


class InputError(SkillqError):
    """Bad run inputs: reported before anything is dispatched."""

    exit_code = 2

    def __init__(self, problems: Iterable[Problem]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


class ExportError(SkillqError):
    pass


class LibraryError(SkillqError):
    pass


class SkillDisabled(LibraryError, Refused):
    """Raised before anything is recorded: the run is refused as a whole."""

    def __init__(self, disabled: Iterable[tuple[str, str | None]]) -> None:
        found = list(disabled)  # (name, "'caller' step x", or None for the skill run)
        self.names = [name for name, _ in found]
        parts = [f"'{name}' is disabled" + (f" (called by {via})" if via else "")
                 for name, via in found]
        super().__init__("; ".join(parts) + "; enable it with `skillq enable "
                         + " ".join(self.names) + "`, or remove it from the pipeline")


class HasDependents(LibraryError, Refused):
    """Every referrer is named, with how it refers, so the user can decide."""

    def __init__(self, action: str, name: str, referrers: Iterable[str]) -> None:
        self.referrers = list(referrers)
        super().__init__(f"cannot {action} '{name}': other skills refer to it: "
                         + "; ".join(self.referrers)
                         + f". Change them first, or {action} anyway with --force")


class ArchiveError(SkillqError):
    pass


class SecretsFileError(ConfigError):
    """Names the file and the fix (``chmod 600 PATH``); never quotes a value."""


class MissingSecret(SkillqError):
    """The step fails before its process starts, naming each secret and how to set it."""

    def __init__(self, names: list[str], reason: str | None = None) -> None:
        wanted = ", ".join(f"{n} (set SKILLQ_SECRET_{n.upper()} or `skillq secrets set {n}`)"
                           for n in names)
        text = f"this worker lacks the secret(s) the skill declares: {wanted}"
        super().__init__(f"{text}; {reason}" if reason else text)
        self.names = names


class TestCaseError(SkillqError):
    __test__ = False  # not a pytest class
    exit_code = 2


class NoteError(SkillqError):
    exit_code = 2


class BuildError(SkillqError):
    """Nothing of the vault changed: a draft that cannot land stays in the store."""

    exit_code = 2


class WaitError(SkillqError):
    """Nothing was decided: the wait is as it was."""

    exit_code = 2


class PublishError(Refused):
    """Nothing was published: the folder and the records are as before."""


class FolderChanged(Refused):
    """Names every changed, added or removed file (a step fails with this message)."""

    error_kind = "folder_changed"
    _SHOWN = 10

    def __init__(self, name: str, version: int, folder: Path,
                 found: Sequence[Change], hint: str | None = None) -> None:
        self.changes = list(found)
        listed = "; ".join(str(c) for c in self.changes[:self._SHOWN])
        more = len(self.changes) - self._SHOWN
        what = (listed + (f"; and {more} more" if more > 0 else "")) if self.changes \
            else "it does not load as that version"
        fix = hint or (f"publish the edits with `skillq publish {name}`, or put v{version}'s "
                       f"files back with `skillq rollback {name} --to {version} --force`")
        super().__init__(f"refusing to run {name} v{version}: the folder {folder} differs "
                         f"from the published v{version}: {what}. To run it, {fix}")


class VersionNotPublished(NotFound):
    error_kind = "version_not_published"

    def __init__(self, name: str, version: int, vault_version: int | None = None) -> None:
        here = f"; this vault has v{vault_version}" if vault_version is not None else ""
        super().__init__(f"{name} v{version} was never published{here}; "
                         f"`skillq versions {name}` lists the published versions")


class ScheduleError(SkillqError):
    exit_code = 1


class CronError(ScheduleError):
    exit_code = 2


class DashboardError(SkillqError):
    exit_code = 2


class ApiError(ConfigError):
    """The local API refused a command (its token, the Host) or broke off mid-request."""


class Relayed(SkillqError):
    """An error the local API raised while serving `skillq run`, relayed as it was."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class NoWorker(SkillqError):
    """No online daemon can run a step the run needs (reported before dispatch)."""

    exit_code = 1


class DatabaseUnreachable(SkillqError):
    """A client stopped waiting: the run itself may still finish (its own exit code, so a
    script can tell "gave up waiting" from "the run failed")."""

    exit_code = 3


class PipelineFailed(SkillqError):
    exit_code = 1


class TestsFailed(SkillqError):
    __test__ = False  # not a pytest class
    exit_code = 1


class BadCursor(SkillqError):
    exit_code = 2


class RunNotFound(NotFound):
    def __init__(self, run_id: str) -> None:
        super().__init__(f"no run {run_id}; `skillq runs` lists them")
        self.run_id = run_id


class RunRefused(Refused):
    """`skillq cancel` or `retry` asked of a run that is not in a state for it."""


class ArtifactError(SkillqError):
    """Names the key (or what was given instead of one) and where keys are shown."""


class IllegalTransition(SkillqError):
    """A state change the machine does not allow (shared/states.py's tables): the
    transitions refuse it, and the planner its step progress."""


class AgentError(SkillqError):
    """An agent step that cannot start: names the value or the setting and the fix."""


class StepFailed(SkillqError):
    """Raised by a step task after its attempts are recorded, so that Celery (Flower,
    task events) shows FAILURE with the step's error; the record is the result."""

    def __init__(self, error: str, *, failed: int = 1, of: int = 1) -> None:
        head = f"{failed} of {of} items failed; the first: " if of > 1 else ""
        super().__init__(head + error)
