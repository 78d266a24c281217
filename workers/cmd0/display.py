"""The X display a desktop step drives: found and reached before anything runs."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

HINT = ("run the cmd0 worker inside an X session, or start a virtual screen (Debian's "
        "xvfb: `Xvfb :99 -screen 0 1280x800x24 &`) and set DISPLAY=:99 for the worker")


def display_problem(env: Mapping[str, str]) -> str | None:
    """Why no X display can be reached with ``env``, or None when one answers."""
    name = env.get("DISPLAY")
    if not name:
        return f"no X display: DISPLAY is not set for this worker; {HINT}"
    try:
        from PIL import ImageGrab  # the screen extra: only desktop steps need it
    except ModuleNotFoundError:
        return "Pillow is not installed on this worker: pip install 'skillq[screen]'"
    try:
        ImageGrab.grab(bbox=(0, 0, 1, 1), xdisplay=name)  # one pixel: a real round trip
    except OSError as exc:
        return f"cannot connect to the X display {name!r} ({exc}); {HINT}"
    return None


def display_env(env: Mapping[str, str], home: Path, scratch: Path) -> dict[str, str]:
    """The display variables for the host process, whose environment is scrubbed and
    whose HOME is a scratch folder: DISPLAY, and the X authority file of the worker
    (XAUTHORITY, else ~/.Xauthority), else an empty one (a display without access
    control, such as Xvfb; pyautogui's Xlib refuses to connect with no file at all)."""
    authority = env.get("XAUTHORITY") or (str(home / ".Xauthority")
                                          if (home / ".Xauthority").is_file() else None)
    if authority is None:
        empty = scratch / "Xauthority"
        empty.touch()
        authority = str(empty)
    return {"DISPLAY": env["DISPLAY"], "XAUTHORITY": authority, "XDG_SESSION_TYPE": "x11"}
