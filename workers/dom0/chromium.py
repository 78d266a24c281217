"""Which Chromium a browser step launches, and how.

In order: ``SKILLQ_CHROMIUM_PATH`` when set; Playwright's own Chromium when
``playwright install chromium`` fetched one; else a system Chromium (Debian's
``chromium``, ``chromium-browser``, Google Chrome) found on PATH or in /usr/bin.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

SYSTEM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
INSTALL_HINT = ("install Debian's chromium (apt-get install chromium), run `playwright "
                "install chromium`, or set SKILLQ_CHROMIUM_PATH to a Chromium or Chrome binary")

# Headless in a closed network: without the background-networking flags Chromium keeps
# trying to reach Google's hosts; root (a container, CI) needs --no-sandbox.
LAUNCH_ARGS = ("--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--no-first-run",
               "--disable-default-apps", "--disable-breakpad", "--disable-quic")


def system_chromium() -> str | None:
    """A Chromium installed on the machine, or None."""
    for name in SYSTEM_NAMES:
        found = shutil.which(name) or (f"/usr/bin/{name}" if Path(f"/usr/bin/{name}").is_file()
                                       else None)
        if found and os.access(found, os.X_OK):
            return found
    return None


def configured_chromium(value: Path | None) -> str | None:
    """SKILLQ_CHROMIUM_PATH, checked; ValueError naming the setting when unusable."""
    if value is None:
        return None
    if not value.is_file() or not os.access(value, os.X_OK):
        raise ValueError(f"SKILLQ_CHROMIUM_PATH={value} is not an executable file; point it "
                         "at a Chromium or Chrome binary, or unset it")
    return str(value)
