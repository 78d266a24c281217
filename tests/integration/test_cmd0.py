"""Desktop (cmd0) steps on a real X display (Xvfb) driving a real Tk window.

Needs Debian's xvfb (apt-get install -y xvfb); .ci/run installs it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import EXAMPLES, HERE, VAULTS, RunResult, Stack, copy_vault, tail, wait_until
from PIL import ImageGrab

from shared.store import get_bytes

INSET_PX = 6  # the template leaves out the button's border, which focus may redraw


@pytest.fixture
def note_app(xdisplay: str, tmp_path: Path) -> Iterator[tuple[Path, dict[str, int]]]:
    """The Tk app on the test's display: (its output file, the Save button's box)."""
    out, ready, log = tmp_path / "notes.txt", tmp_path / "ready.json", tmp_path / "app.log"
    with log.open("wb") as fh:
        proc = subprocess.Popen([sys.executable, str(HERE / "tk_note_app.py"), str(out),
                                 str(ready)], env={**os.environ, "DISPLAY": xdisplay},
                                stdout=fh, stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: (ready.is_file() and ready.read_text()) or proc.poll() is not None,
                   20, "the Tk app's window")
        assert proc.poll() is None, f"the Tk app exited:\n{tail(log)}"
        yield out, json.loads(ready.read_text())
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_types_into_a_window_and_clicks_a_button_found_by_its_image(
        run_skill: Callable[..., RunResult], healthy: Stack, xdisplay: str, tmp_path: Path,
        note_app: tuple[Path, dict[str, int]]) -> None:
    out, save = note_app
    vault = copy_vault(VAULTS / "screen", tmp_path / "vault")
    # The template is cut from the running app, so fonts of this machine match.
    box = (save["left"] + INSET_PX, save["top"] + INSET_PX,
           save["left"] + save["width"] - INSET_PX, save["top"] + save["height"] - INSET_PX)
    ImageGrab.grab(bbox=box, xdisplay=xdisplay).save(vault / "tk-note" / "save.png")

    result = run_skill("tk-note", vault, "--json", inputs={"text": "hello from skillq"})
    assert result.code == 0, result

    lines = wait_until(lambda: out.is_file() and out.read_text().splitlines(), 5,
                       "the app's saved note")
    assert lines == ["save: hello from skillq"]  # and no "clear": the right button
    outputs = result.json()
    found = outputs["save_at"]
    assert save["left"] < found["x"] < save["left"] + save["width"], (found, save)
    assert save["top"] < found["y"] < save["top"] + save["height"], (found, save)
    ref = outputs["screen"]["$ref"]
    with healthy.db() as session:
        assert get_bytes(session, ref).startswith(b"\x89PNG")


def test_the_example_desktop_script_files_a_note(
        run_skill: Callable[..., RunResult], xdisplay: str, tmp_path: Path) -> None:
    """examples/git-digest/digest-note: a run: script on cmd0 starts its own Tk app,
    finds Save by its shipped picture, types and clicks; the app saved the note."""
    vault = copy_vault(EXAMPLES / "git-digest", tmp_path / "git-digest")
    result = run_skill("digest-note", vault, "--json",
                       inputs={"note": "skillq: 12 commits this week"})
    assert result.code == 0, result
    assert result.json() == {"saved": "skillq: 12 commits this week", "matches": True}
