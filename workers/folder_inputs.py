"""Folders given to a script step (``directory`` inputs): the step sees each as a plain
path, read-only where it lies on this machine (the sandbox binds it: workers/sandbox/),
and git trusts those folders in the step's own environment, nothing more.

A folder stays on its machine: the run was routed here because this daemon is on it
(lifecycle/routing.py), so a folder missing here is one that went away since the run
started, or a daemon announcing another machine's id.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from shared.manifest import Manifest
from shared.valuetypes import DIR_KEY, dir_values, is_dir_value


class FolderProblem(Exception):
    """A folder input this step cannot have: the step fails with this message."""


def folders(manifest: Manifest, inputs: dict[str, Any]) -> list[str]:
    """The paths of the folders given to this step's directory inputs, in input order."""
    found: list[str] = []
    for spec in manifest.inputs:
        if spec.value_type.base == "directory":
            found += [d[DIR_KEY] for d in dir_values(inputs.get(spec.name))]
    return found


def as_paths(manifest: Manifest, inputs: dict[str, Any]) -> dict[str, Any]:
    """``inputs`` as the script sees them: each folder its absolute path. FolderProblem
    when a folder is not on this machine."""
    seen = dict(inputs)
    for spec in manifest.inputs:
        if spec.value_type.base == "directory" and inputs.get(spec.name) is not None:
            seen[spec.name] = _path(inputs[spec.name], spec.name)
    return seen


def _path(value: Any, name: str) -> Any:
    if isinstance(value, list):
        return [_path(v, f"{name}[{i}]") for i, v in enumerate(value)]
    if not is_dir_value(value):
        raise FolderProblem(f"input '{name}': expected a folder, got {str(value)[:60]}")
    path = value[DIR_KEY]
    if not Path(path).is_dir():
        raise FolderProblem(f"input '{name}': the folder {path} (on {value['host']}) is not "
                            "on this daemon's machine, or is gone; start the run again on "
                            "the machine that has it")
    return path


def git_trust(paths: list[str]) -> dict[str, str]:
    """Environment that makes git trust exactly these folders and the repositories that
    hold them (git 2.35.2+ refuses a repository owned by another user, and a step runs
    as its own account). Set in the step's environment, never in a config file, so it
    lasts for this step alone (docs/security.md)."""
    trusted: list[str] = []
    for path in paths:
        for candidate in (path, *_repository_top(Path(path))):
            if candidate not in trusted:
                trusted.append(candidate)
    env = {"GIT_CONFIG_COUNT": str(len(trusted))}
    for i, path in enumerate(trusted):
        env[f"GIT_CONFIG_KEY_{i}"] = "safe.directory"
        env[f"GIT_CONFIG_VALUE_{i}"] = path
    return env if trusted else {}


def _repository_top(path: Path) -> list[str]:
    """The top folder of the work tree ``path`` lies in (git checks that one, not the
    folder given), if any: the nearest folder at or above it with a ``.git``."""
    for folder in (path, *path.parents):
        if (folder / ".git").exists():
            return [str(folder)] if folder != path else []
    return []
