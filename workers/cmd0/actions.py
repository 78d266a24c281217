"""Running a list of desktop actions with pyautogui on the X display in DISPLAY.

Everything that can be checked is checked before the first action (templates load,
hotkeys are keys pyautogui knows), so a typo never leaves a half-driven desktop.
Screens are grabbed with Pillow (XCB) and templates matched by pyscreeze (OpenCV,
with a confidence threshold).
"""

from __future__ import annotations

import io
import time
from pathlib import Path
from typing import Any

import pyautogui
import pyscreeze
from PIL import Image, ImageGrab

from shared.screen_secrets import SecretRefError, filled
from shared.secrets import redact
from workers.screen.host import HostError, Secrets, Workspace, action_error

FIELD = "desktop"
POLL_S = 0.1  # how often a wait looks at the screen again


def run_actions(spec: dict[str, Any], workspace: Workspace, secrets: Secrets
                ) -> dict[str, Any]:
    actions: list[dict[str, Any]] = spec["actions"]
    templates = _prepare(actions)
    pyautogui.FAILSAFE = False  # the pointer in a corner is no emergency on a virtual screen
    pyautogui.PAUSE = spec["pause"]
    outputs: dict[str, Any] = {}
    for index, action in enumerate(actions):
        kind, image = action["kind"], action.get("image")
        workspace.doing(f"{FIELD}.actions[{index}] ({kind} {image!r})" if image
                        else f"{FIELD}.actions[{index}] ({kind})")
        try:
            # A type text's secrets join it only now, and only in memory.
            value = _run(filled(action, secrets), templates.get(index), spec, workspace)
        except (HostError, SecretRefError) as exc:
            raise action_error(FIELD, index, kind, redact(str(exc), secrets),
                               image) from None
        if "output" in action:
            outputs[action["output"]] = value
    return outputs


def _prepare(actions: list[dict[str, Any]]) -> dict[int, Image.Image]:
    templates = {}
    for index, action in enumerate(actions):
        kind, image = action["kind"], action.get("image")
        if image is not None:
            try:
                with Image.open(Path(image)) as img:
                    templates[index] = img.convert("RGB")
            except OSError as exc:
                raise action_error(FIELD, index, kind, f"cannot read the template image "
                                   f"({exc})", image) from None
        for key in action.get("keys", ()):
            if key.lower() not in pyautogui.KEYBOARD_KEYS:
                raise action_error(FIELD, index, kind, f"'{key}' is not a key name; use "
                                   "names such as ctrl, alt, shift, enter, tab, a, f5")
    return templates


def _run(action: dict[str, Any], template: Image.Image | None, spec: dict[str, Any],
         workspace: Workspace) -> Any:
    kind = action["kind"]
    if kind in ("click", "double_click"):
        x, y = (action["x"], action["y"]) if template is None else \
            _find(template, action, spec)["center"]
        (pyautogui.click if kind == "click" else pyautogui.doubleClick)(x, y)
        return None
    if kind == "type":
        pyautogui.write(action["text"], interval=action.get("interval", 0.0))
    elif kind == "hotkey":
        pyautogui.hotkey(*[k.lower() for k in action["keys"]])
    elif kind == "wait_for":
        assert template is not None
        _find(template, action, spec)
    elif kind == "locate":
        assert template is not None
        return _find(template, action, spec)["box"]
    elif kind == "screenshot":
        buffer = io.BytesIO()
        ImageGrab.grab().save(buffer, format="PNG")
        return workspace.save(buffer.getvalue(), "image/png")
    return None


def _find(template: Image.Image, action: dict[str, Any], spec: dict[str, Any]
          ) -> dict[str, Any]:
    """Look for the template until it shows or the action's timeout passes."""
    confidence = action.get("confidence") or spec["confidence"]
    timeout_s = action.get("timeout") or spec["action_timeout_s"]
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            box = pyscreeze.locate(template, ImageGrab.grab(), confidence=confidence)
        except pyscreeze.ImageNotFoundException:
            box = None
        if box is not None:
            left, top, width, height = (int(v) for v in box)  # numpy ints are not JSON
            return {"center": (left + width // 2, top + height // 2),
                    "box": {"x": left + width // 2, "y": top + height // 2, "left": left,
                            "top": top, "width": width, "height": height}}
        if time.monotonic() >= deadline:
            raise HostError(f"the image did not show on screen within {timeout_s:g} s "
                            f"(confidence {confidence:g})")
        time.sleep(POLL_S)
