"""shared/errors.py's tree: every class's exit code, the families callers catch (NotFound,
Refused), and the status the local API gives each (orchestrator/api/app.py)."""

from __future__ import annotations

import asyncio
import inspect

import pytest
from starlette.requests import Request

from orchestrator.api.app import _skillq_error
from shared import errors
from shared.errors import NotFound, Refused, SkillqError

# What `skillq` exits with for each class: scripts test these numbers, so a change is a
# decision made here, never a side effect of moving a class in the tree.
EXIT_CODES = {
    "SkillqError": 1, "NotFound": 1, "Refused": 1,
    "ConfigError": 2, "SecretsFileError": 2, "SandboxError": 2, "DaemonKeyError": 2,
    "ApiError": 2,
    "VaultError": 2, "SkillNotFound": 2,
    "ValidationFailed": 1, "InputError": 2, "NoWorker": 1, "DatabaseUnreachable": 3,
    "PipelineFailed": 1, "Relayed": 1, "TestsFailed": 1, "ExportError": 1,
    "LibraryError": 1, "SkillDisabled": 1, "HasDependents": 1,
    "ArchiveError": 1, "MissingSecret": 1, "TestCaseError": 2, "NoteError": 2, "WaitError": 2,
    "BuildError": 2,
    "PublishError": 1, "FolderChanged": 1, "VersionNotPublished": 1,
    "ScheduleError": 1, "CronError": 2, "DashboardError": 2, "BadCursor": 2,
    "RunNotFound": 1, "RunRefused": 1, "ArtifactError": 1, "StepFailed": 1,
    "AgentError": 1, "KeyRegistryError": 2, "MessageRefused": 1, "IllegalTransition": 1,
}

FAMILIES: dict[type[SkillqError], set[str]] = {
    NotFound: {"SkillNotFound", "RunNotFound", "VersionNotPublished"},
    Refused: {"RunRefused", "SkillDisabled", "HasDependents", "PublishError",
              "FolderChanged"},
}


def defined() -> dict[str, type[SkillqError]]:
    return {name: cls for name, cls in vars(errors).items()
            if inspect.isclass(cls) and issubclass(cls, SkillqError)
            and cls.__module__ == errors.__name__}


def test_every_class_keeps_its_exit_code() -> None:
    assert {name: cls.exit_code for name, cls in defined().items()} == EXIT_CODES


@pytest.mark.parametrize("family", list(FAMILIES), ids=lambda f: f.__name__)
def test_the_families_hold_what_they_say(family: type[SkillqError]) -> None:
    members = {name for name, cls in defined().items()
               if issubclass(cls, family) and cls is not family}
    assert members == FAMILIES[family]
    assert "exit_code" not in vars(family)  # a member keeps the code it had


def test_the_older_relations_still_hold() -> None:
    assert issubclass(errors.SkillNotFound, errors.VaultError)
    assert issubclass(errors.SkillDisabled, errors.LibraryError)
    assert issubclass(errors.HasDependents, errors.LibraryError)
    assert issubclass(errors.CronError, errors.ScheduleError)
    for cls in (errors.SecretsFileError, errors.SandboxError, errors.DaemonKeyError,
                errors.ApiError):
        assert issubclass(cls, errors.ConfigError)
    assert not issubclass(errors.LibraryError, Refused)  # bad labels, usage: not a state


def test_the_api_gives_404_to_a_not_found_and_400_to_the_rest() -> None:
    request = Request({"type": "http"})
    got = {}
    for name, cls in defined().items():
        exc = cls.__new__(cls)  # the status depends on the class only
        got[name] = asyncio.run(_skillq_error(request, exc)).status_code
    # VersionNotPublished is raised on a worker only (a step fails with it), never here.
    assert {name for name, status in got.items() if status == 404} == \
        {"NotFound", *FAMILIES[NotFound]}
    assert set(got.values()) == {404, 400}
