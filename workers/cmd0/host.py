"""The desktop host: ``python -I -m workers.cmd0.host``, run by the worker for a cmd0
step (workers/screen/host.py says how). pyautogui reads DISPLAY when it is imported,
so it is imported here, after the display has been checked."""

from __future__ import annotations

import os
from typing import Any

from workers.cmd0.display import display_problem
from workers.screen.host import HostError, Secrets, Workspace, main


def run(spec: dict[str, Any], inputs: dict[str, Any], workspace: Workspace,
        secrets: Secrets) -> dict[str, Any]:
    problem = display_problem(os.environ)
    if problem:
        raise HostError(problem)
    from workers.cmd0.actions import run_actions  # imports pyautogui: needs the display

    return run_actions(spec, workspace, secrets)


if __name__ == "__main__":
    main(run)
