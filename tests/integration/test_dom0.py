"""Browser (dom0) steps against a real Chromium and pages served on 127.0.0.1.

Needs Debian's chromium (apt-get install -y chromium); .ci/run installs it.
"""

from __future__ import annotations

import html
import itertools
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import (
    VAULTS,
    RunResult,
    Stack,
    WorkerSpec,
    copy_vault,
    nodename,
)
from support.pages import HtmlPages, serving

from workers.attempt_end import STEP_MARKER
from workers.dom0.chromium import INSTALL_HINT, system_chromium

FORM = ("<html><head><title>Greeter</title></head><body><h1>Greeter</h1>"
        "<form action='/greet' method='post'><input id='name' name='name'>"
        "<button type='submit'>Send</button></form></body></html>")
# A page that shows #ready a moment after it loads: each browser step takes a while.
SETTLING = ("<html><body><h1>Page {n}</h1><script>setTimeout(() => {{"
            "const d = document.createElement('div'); d.id = 'ready'; d.textContent = 'ok';"
            "document.body.append(d); }}, 300);</script></body></html>")


class Pages(HtmlPages):
    def do_GET(self) -> None:
        if self.path == "/form":
            self.send_html(FORM)
        elif self.path.startswith("/page/"):
            self.send_html(SETTLING.format(n=html.escape(self.path.rsplit("/", 1)[1])))
        else:
            self.send_error(404)

    def do_POST(self) -> None:
        size = int(self.headers.get("Content-Length") or 0)
        name = urllib.parse.parse_qs(self.rfile.read(size).decode()).get("name", [""])[0]
        self.send_html(f"<html><body><h1>Greeting</h1><p id='result'>Hello, "
                       f"{html.escape(name)}!</p></body></html>")


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    if system_chromium() is None:
        pytest.fail(f"no Chromium on this machine for the dom0 tests: {INSTALL_HINT}")
    with serving(Pages) as url:
        yield url


@pytest.fixture
def screen_vault(tmp_path: Path) -> Path:
    return copy_vault(VAULTS / "screen", tmp_path / "vault")


def test_fills_a_form_and_reads_the_result_page(
        run_skill: Callable[..., RunResult], screen_vault: Path, site: str) -> None:
    result = run_skill("form-submit", screen_vault, "--json",
                       inputs={"url": f"{site}/form", "name": "Ada <Lovelace>"})
    assert result.code == 0, result
    assert result.json() == {"greeting": "Hello, Ada <Lovelace>!", "title": "Greeting"}


def test_a_wrong_selector_fails_naming_the_action_and_selector(
        run_skill: Callable[..., RunResult], healthy: Stack, screen_vault: Path,
        site: str) -> None:
    result = run_skill("form-submit", screen_vault,
                       inputs={"url": f"{site}/form", "name": "Ada", "submit": "#no-such"})
    assert result.code == 1, result
    expected = "browser.actions[2] (click '#no-such') failed"
    assert expected in result.stderr, result
    assert result.run_id is not None
    (step,) = healthy.steps(result.run_id)
    assert step.state == "failed" and step.error is not None
    assert step.error.startswith(expected), step.error
    assert "within 3 s" in step.error  # the action's own timeout
    assert step.lock_wait_ms is not None  # it ran under the machine's dom0 lock


def test_dom0_steps_on_one_machine_never_overlap(
        run_skill: Callable[..., RunResult], healthy: Stack, screen_vault: Path,
        site: str, tmp_path: Path) -> None:
    """A fan-out of 5 browser steps with a second dom0 worker on the same SKILLQ_HOME
    (started by mistake): the machine lock still runs them one after another."""
    second = healthy.start_worker(WorkerSpec("dom0-second", "dom0", 1))
    try:
        healthy.wait_ready(["dom0-second"])
        urls = [f"{site}/page/{n}" for n in range(5)]
        result = run_skill("visit-pages", screen_vault, "--json", inputs={"urls": urls})
        assert result.code == 0, result
        assert result.json() == {"headings": [f"Page {n}" for n in range(5)]}
    finally:
        second.stop()
    assert result.run_id is not None
    rows = healthy.steps(result.run_id, "visit")
    assert len(rows) == 5 and all(r.state == "succeeded" for r in rows)
    assert {r.worker for r in rows} == {nodename("dom0"), nodename("dom0-second")}
    held = sorted((r.locked_at, r.unlocked_at) for r in rows
                  if r.locked_at is not None and r.unlocked_at is not None)
    assert len(held) == 5
    for (_, before_end), (after_start, _) in itertools.pairwise(held):
        assert after_start >= before_end, held
    waits = [r.lock_wait_ms for r in rows if r.lock_wait_ms is not None]
    assert len(waits) == 5 and max(waits) > 50, waits  # the second worker queued
    shown = healthy.cli("run-show", result.run_id, cwd=tmp_path)
    assert shown.returncode == 0 and "for the dom0 lock" in shown.stdout, shown


def test_a_browser_step_past_its_timeout_leaves_no_browser_behind(
        run_skill: Callable[..., RunResult], healthy: Stack, screen_vault: Path,
        site: str) -> None:
    result = run_skill("hang-in-browser", screen_vault, inputs={"url": f"{site}/form"})
    assert result.code == 1, result
    assert result.run_id is not None
    (step,) = healthy.steps(result.run_id)
    assert step.error_kind == "timeout", step.error
    assert step.error == ("timed out after 6 s (process group killed), during "
                          "browser.script hang.py"), step.error
    marker = f"{STEP_MARKER}={step.id}".encode()
    left = [p.name for p in Path("/proc").glob("[0-9]*") if _environ_has(p, marker)]
    assert not left, f"processes of the step still run: {left}"


def _environ_has(proc: Path, marker: bytes) -> bool:
    try:
        return marker in (proc / "environ").read_bytes().split(b"\0")
    except OSError:
        return False
