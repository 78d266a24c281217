"""Running a dom0 (browser) or cmd0 (desktop) step: one at a time per machine.

Every leaf step on a screen queue runs under the machine's lock for its class (see
lock.py). A skill with ``browser:`` or ``desktop:`` actions (or a ``browser.script``)
is run by a host process (host.py) through the script executor; a plain ``run:``
script on those queues runs as it is, with the browser path or the display handed
to it. Either way the result is the script executor's, so the step runner records
it like any other.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shlex
import shutil
import sys
import tempfile
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from shared.manifest import Approach, Manifest, RunSpec
from shared.resolve import ResolveError, Scope, resolve
from shared.screen_secrets import SecretRefError, marked, split_secrets
from shared.settings import Settings
from workers.cmd0.display import display_env, display_problem
from workers.dom0.chromium import configured_chromium, system_chromium
from workers.file_inputs import DatabaseFiles
from workers.sandbox import Sandbox
from workers.screen.artifacts import store_artifacts
from workers.screen.host import SPEC_VAR, Workspace
from workers.screen.lock import LockTimeout, machine_lock
from workers.screen.reap import TAG_VAR, reap
from workers.script_executor import ScriptResult, ScriptStatus, run_script

SCREEN_QUEUES = (Approach.DOM0, Approach.CMD0)
_HOSTS = {Approach.DOM0: "workers.dom0.host", Approach.CMD0: "workers.cmd0.host"}


@dataclass(frozen=True)
class ScreenRun:
    done: ScriptResult
    lock_wait_ms: float | None = None  # None: it never queued for the lock
    locked_at: datetime | None = None  # when it held the screen: never overlaps another's
    unlocked_at: datetime | None = None


def is_screen_step(manifest: Manifest) -> bool:
    return not manifest.is_orchestrator and manifest.effective_approach in SCREEN_QUEUES


def run_screen_step(folder: Path, manifest: Manifest, inputs: dict[str, Any], *,
                    settings: Settings, database_url: str, secrets: Mapping[str, str],
                    workdir: Path | None, extra_env: Mapping[str, str],
                    scratch: Path | None = None, sandbox: Sandbox | None = None) -> ScreenRun:
    approach = manifest.effective_approach
    env = dict(extra_env)
    try:
        problem = display_problem(os.environ) if approach is Approach.CMD0 else None
        if problem:
            raise ValueError(problem)
        spec = host_spec(manifest, inputs, settings)
    except ValueError as exc:  # before anything ran
        return ScreenRun(_failed(str(exc)))
    with _workspace_dir(approach, scratch, sandbox) as tmp:
        workspace = Workspace(tmp)
        if approach is Approach.CMD0:
            env |= display_env(os.environ, Path.home(), workspace.root)
        tag = uuid.uuid4().hex
        env[TAG_VAR] = tag
        if spec is None:  # a plain script: it drives the screen itself
            assert manifest.run is not None
            runnable, timeout_s = manifest, manifest.run.timeout
            # `python3` is the worker's own Python first: it has Playwright and pyautogui.
            env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent),
                                           os.environ.get("PATH") or os.defpath])
            if approach is Approach.DOM0 and (chromium := _chromium(settings)):
                env["SKILLQ_CHROMIUM_PATH"] = chromium
        else:
            workspace.spec.write_text(json.dumps(spec))
            env[SPEC_VAR] = str(workspace.spec)
            timeout_s = spec["timeout_s"]
            command = shlex.join([sys.executable, "-I", "-m", _HOSTS[approach]])
            runnable = manifest.model_copy(update={
                "run": RunSpec(command=command, timeout=timeout_s, retries=0)})
        if sandbox is not None:  # the host writes its screenshots here, as the step account
            sandbox.prepare(workspace.root)
        try:
            with machine_lock(settings.home, str(approach),
                              timeout_s=settings.max_step_timeout_s) as waited_ms:
                locked_at = datetime.now(UTC)
                try:
                    done = run_script(folder, runnable, inputs, secrets=secrets,
                                      timeout_s=timeout_s, workdir=workdir, extra_env=env,
                                      max_output_bytes=settings.max_output_bytes,
                                      scratch=scratch, sandbox=sandbox,
                                      files=DatabaseFiles(database_url,
                                                          settings.file_max_bytes))
                finally:
                    reap(tag)  # a browser outside the host's process group, say
                    unlocked_at = datetime.now(UTC)
        except LockTimeout as exc:
            return ScreenRun(_failed(str(exc)), settings.max_step_timeout_s * 1000)
        return ScreenRun(_finished(done, workspace, database_url), waited_ms, locked_at,
                         unlocked_at)


@contextlib.contextmanager
def _workspace_dir(approach: Approach, scratch: Path | None,
                   sandbox: Sandbox | None) -> Iterator[Path]:
    """The host's private folder: beside the attempt's scratch folder when it has one
    (so the end of the attempt removes both, workers/attempt_end.py), else a new one."""
    if scratch is None:
        with tempfile.TemporaryDirectory(prefix=f"skillq-{approach}-",
                                         dir=sandbox.slot if sandbox else None) as tmp:
            yield Path(tmp)
        return
    folder = scratch.with_name(scratch.name + "-screen")
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(mode=0o700, parents=True)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def host_spec(manifest: Manifest, inputs: dict[str, Any], settings: Settings
              ) -> dict[str, Any] | None:
    """What the host process runs, input references resolved, secrets as markers that
    name them (shared/screen_secrets.py): this goes to a file, so it never holds a
    secret's value. None for a plain script. ValueError naming the action when a
    reference has no value."""
    # The declared secrets, by name: the host finds their values in its environment.
    secrets = list(manifest.auth)
    if manifest.browser is not None:
        b = manifest.browser
        return {"actions": _resolved("browser", b.actions, inputs) if b.actions else None,
                "script": b.script, "timeout_s": b.timeout, "action_timeout_s":
                b.action_timeout, "viewport": list(b.viewport), "chromium":
                configured_chromium(settings.chromium_path), "secrets": secrets}
    if manifest.desktop is not None:
        d = manifest.desktop
        return {"actions": _resolved("desktop", d.actions, inputs), "timeout_s": d.timeout,
                "action_timeout_s": d.action_timeout, "confidence": d.confidence,
                "pause": d.pause, "secrets": secrets}
    return None


def _resolved(field: str, actions: Any, inputs: dict[str, Any]) -> list[dict[str, Any]]:
    scope = Scope(inputs=inputs)
    out = []
    for index, action in enumerate(actions):
        body = action.body.model_dump(exclude_none=True)
        try:
            filled = {k: v if k == "output" else _field(v, scope) for k, v in body.items()}
        except (ResolveError, SecretRefError) as exc:
            raise ValueError(f"{field}.actions[{index}] ({action.kind}): {exc}") from None
        out.append({"kind": action.kind, **filled})
    return out


def _field(value: Any, scope: Scope) -> Any:
    """One field of an action: its inputs resolved; a string holding secrets becomes a
    marker whose text parts are resolved one by one (never parsed again afterwards)."""
    if not isinstance(value, str):
        return resolve(value, scope)
    parts = split_secrets(value)
    if all(isinstance(p, str) for p in parts):
        return _text(resolve(value, scope))
    return marked([_text(resolve(p, scope)) if isinstance(p, str) else p for p in parts])


def _text(value: Any) -> Any:
    """A lone reference keeps its type: in a string field, text it."""
    return value if isinstance(value, str) else json.dumps(value)


def _chromium(settings: Settings) -> str | None:
    try:
        return configured_chromium(settings.chromium_path) or system_chromium()
    except ValueError:
        return None  # the script finds its own browser, or says why it cannot


def _failed(error: str) -> ScriptResult:
    return ScriptResult(ScriptStatus.FAILED, None, None, error, "", "", 0, 0)


def _finished(done: ScriptResult, workspace: Workspace, database_url: str) -> ScriptResult:
    """The host's own account of a failure (the action and selector), and screenshots
    moved into the shared store."""
    if done.status is ScriptStatus.FAILED and workspace.error.is_file():
        return dataclasses.replace(done, error=workspace.error.read_text())
    if done.status is ScriptStatus.TIMEOUT and workspace.progress.is_file():
        return dataclasses.replace(done, error=f"{done.error}, during "
                                   f"{workspace.progress.read_text()}")
    if done.status is ScriptStatus.SUCCESS and done.outputs:
        try:
            outputs = store_artifacts(database_url, done.outputs, workspace.artifacts)
        except ValueError as exc:
            return dataclasses.replace(done, status=ScriptStatus.BAD_OUTPUT, error=str(exc),
                                       outputs=None)
        return dataclasses.replace(done, outputs=outputs)
    return done
