"""The browser host: ``python -I -m workers.dom0.host``, run by the worker for a dom0
step (workers/screen/host.py says how). It launches Chromium, opens a fresh context and
page, then runs the skill's actions, or its script's ``run(page, inputs) -> dict``."""

from __future__ import annotations

import importlib.util
import sys
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shared.secrets import redact
from workers.dom0.chromium import INSTALL_HINT, LAUNCH_ARGS, system_chromium
from workers.screen.host import HostError, Secrets, Workspace, first_line, main, media_type

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page, Playwright


def run(spec: dict[str, Any], inputs: dict[str, Any], workspace: Workspace,
        secrets: Secrets) -> dict[str, Any]:
    # Imported here: a missing screen extra is then a clear error, not a traceback.
    from playwright.sync_api import sync_playwright

    from workers.dom0.actions import run_actions

    with sync_playwright() as pw:
        browser = _launch(pw, spec.get("chromium"))
        try:
            width, height = spec["viewport"]
            context = browser.new_context(viewport={"width": width, "height": height})
            context.set_default_timeout(1000 * spec["action_timeout_s"])
            page = context.new_page()
            if spec.get("script"):
                return _run_script(page, spec["script"], inputs, workspace, secrets)
            return run_actions(page, spec["actions"], workspace, spec["action_timeout_s"],
                               secrets)
        finally:
            browser.close()


def _launch(pw: Playwright, configured: str | None) -> Browser:
    """SKILLQ_CHROMIUM_PATH, else Playwright's own Chromium, else the system's."""
    from playwright.sync_api import Error as PlaywrightError

    tried: list[str] = []
    for path in ([configured] if configured else [None, system_chromium()]):
        if path is None and tried:
            continue
        try:
            return pw.chromium.launch(executable_path=path, args=list(LAUNCH_ARGS),
                                      headless=True)
        except PlaywrightError as exc:
            tried.append(f"{path or 'Playwright`s own Chromium'}: {first_line(exc)}")
    raise HostError(f"cannot start Chromium ({'; '.join(tried)}); {INSTALL_HINT}")


def _run_script(page: Page, script: str, inputs: dict[str, Any], workspace: Workspace,
                secrets: Secrets) -> dict[str, Any]:
    """Call ``run(page, inputs)`` of the skill's script; bytes it returns become
    artifacts in the shared store."""
    path = Path.cwd() / script
    # The host runs isolated (-I), which ignores PYTHONDONTWRITEBYTECODE: the skill's
    # modules (copied without bytecode by the script executor) leave none behind either.
    sys.dont_write_bytecode = True
    sys.path.append(str(path.parent))  # its own helper modules, after ours
    loader = importlib.util.spec_from_file_location("skill_browser_script", path)
    if loader is None or loader.loader is None:
        raise HostError(f"browser.script {script} cannot be loaded as Python")
    module = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(module)
    entry = getattr(module, "run", None)
    if not callable(entry):
        raise HostError(f"browser.script {script} defines no run(page, inputs) function")
    workspace.doing(f"browser.script {script}")
    try:
        outputs = entry(page, inputs)
    except Exception as exc:
        # the stderr tail keeps where in the script it failed (the secrets it read out)
        print(redact(traceback.format_exc(), secrets), file=sys.stderr, end="")
        raise HostError(f"browser.script {script} failed: {type(exc).__name__}: "
                        f"{first_line(exc)}") from None
    if not isinstance(outputs, dict):
        raise HostError(f"browser.script {script}: run() returned {type(outputs).__name__}, "
                        "not a dict of outputs")
    return {k: workspace.save(v, media_type(v)) if isinstance(v, bytes) else v
            for k, v in outputs.items()}


if __name__ == "__main__":
    main(run)
