"""scripts/debian-packages, which scripts/test runs first: with everything installed it
says nothing; where it cannot install what is missing (not root), it names each missing
package and the command that installs it, and fails before anything else runs."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "debian-packages"


def test_with_everything_installed_it_passes_quietly() -> None:
    done = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "" and done.stderr == ""


def test_a_user_who_cannot_install_is_told_what_is_missing_and_how() -> None:
    """xdotool hidden (a mount namespace of its own, /dev/null over the program) and the
    script run as an account that cannot use apt-get (fed on stdin: root opens it)."""
    if os.geteuid() != 0:
        pytest.fail("this test hides a program with a mount namespace: run the suite as root")
    xdotool = shutil.which("xdotool")
    assert xdotool, "scripts/debian-packages installs xdotool before the tests run"
    hide = f"mount --bind /dev/null {xdotool} && exec setpriv --reuid=nobody " \
           f"--regid=nogroup --clear-groups bash -s < {SCRIPT}"
    done = subprocess.run(["unshare", "-m", "sh", "-c", hide], capture_output=True,
                          text=True, timeout=60, check=False, cwd="/")
    assert done.returncode == 1, done.stderr
    assert "not installed: xdotool" in done.stderr
    assert "sudo apt-get install -y xdotool" in done.stderr
    assert "installing" not in done.stderr
