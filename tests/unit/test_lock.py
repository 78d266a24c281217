"""The lock: uv.lock agrees with pyproject.toml, requirements.lock is its export, and the
venv the tests run in was installed from it (scripts/bootstrap). A fresh install next
year must get the versions this suite passed with, not that day's releases."""

import re
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
EXPORT = ["export", "--frozen", "--extra", "dev", "--no-emit-project",
          "--format", "requirements-txt", "--quiet"]


def _uv() -> str:
    beside = Path(sys.executable).parent / "uv"  # the locked uv, in the tests' venv
    found = str(beside) if beside.exists() else shutil.which("uv")
    assert found, "uv is not installed: it is a dev dependency (bash scripts/bootstrap)"
    return found


def _uv_run(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([_uv(), *args], cwd=folder, capture_output=True, text=True,
                          timeout=120, check=False)


def _pins(text: str) -> dict[str, tuple[str, str | None]]:
    """name -> (version, marker) of each `name==version [; marker]` line."""
    pins = {}
    for line in text.splitlines():
        m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)\s*(?:;\s*([^\\]+?))?\s*\\?$",
                     line)
        if m:
            pins[canonicalize_name(m[1])] = (m[2], m[3])
    return pins


def _body(text: str) -> list[str]:
    """The lines after uv's header comment (which names the output file)."""
    lines = text.splitlines()
    while lines and lines[0].startswith("#"):
        lines.pop(0)
    return lines


def test_uv_lock_agrees_with_pyproject() -> None:
    done = _uv_run(ROOT, "lock", "--check", "--offline")
    assert done.returncode == 0, (
        "uv.lock does not match pyproject.toml; run `bash scripts/lock` and commit both "
        f"lock files:\n{done.stderr}")


def test_the_check_catches_a_range_the_lock_does_not_meet(tmp_path: Path) -> None:
    """The check above can fail: a copy whose pyproject.toml asks for a dependency the lock
    lacks, or a range its locked version misses, is refused."""
    for change in (('"filelock>=3.13",', '"filelock>=3.13",\n    "six>=1",'),
                   ('"rich>=13"', '"rich>=13,<2"')):
        shutil.copy(ROOT / "uv.lock", tmp_path / "uv.lock")
        text = (ROOT / "pyproject.toml").read_text()
        assert change[0] in text
        (tmp_path / "pyproject.toml").write_text(text.replace(change[0], change[1]))
        done = _uv_run(tmp_path, "lock", "--check", "--offline")
        assert done.returncode != 0, f"{change[1]!r} passed the lock check"


def test_requirements_lock_is_the_export_of_uv_lock(tmp_path: Path) -> None:
    done = _uv_run(ROOT, *EXPORT, "--output-file", str(tmp_path / "out.txt"))
    assert done.returncode == 0, done.stderr
    assert _body((tmp_path / "out.txt").read_text()) == \
        _body((ROOT / "requirements.lock").read_text()), (
        "requirements.lock is not uv.lock's export; run `bash scripts/lock`")


def test_every_lock_line_carries_its_hashes() -> None:
    text = (ROOT / "requirements.lock").read_text()
    pins = _pins(text)
    assert len(pins) > 50
    for block in re.split(r"\n(?=[A-Za-z0-9])", text):
        if re.match(r"^[A-Za-z0-9][A-Za-z0-9._-]*==", block):
            assert "--hash=sha256:" in block, block.splitlines()[0]


def test_the_venv_holds_exactly_the_locked_versions() -> None:
    """scripts/bootstrap installed the lock, not the newest releases in pyproject's
    ranges: each locked package that applies here is installed at its locked version."""
    pins = _pins((ROOT / "requirements.lock").read_text())
    wrong = []
    for name, (version, marker) in sorted(pins.items()):
        if marker and not Marker(marker).evaluate():
            continue
        try:
            have = metadata.version(name)
        except metadata.PackageNotFoundError:
            wrong.append(f"{name}: not installed (locked {version})")
            continue
        if have != version:
            wrong.append(f"{name}: {have} installed, {version} locked")
    if wrong:
        pytest.fail("the venv was not installed from requirements.lock (bash "
                    "scripts/bootstrap):\n" + "\n".join(wrong))
