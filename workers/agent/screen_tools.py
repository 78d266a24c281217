"""A builder's look at a page or a screen (issue 44): ``browse`` for a builder of a dom0
skill, ``look_at_screen`` for one of a cmd0 skill; no other builder gets them.

Each call holds the machine's dom0 or cmd0 lock (workers/screen/lock.py) for as long as
it runs, and only then: a builder thinking between calls holds nothing, so dom0 and cmd0
steps, and other builders' calls, go on meanwhile. A code builder never waits for it.

The browser is Chromium through Playwright, headless, in a fresh context each call
(workers/dom0/chromium.py picks the binary, as for a dom0 step); the desktop is the
worker's own X display (DISPLAY), listed with xdotool and grabbed with Pillow, the
screenshot kept in the shared store. A failure (no Chromium, no display, the lock taken
too long, a page that does not load, a selector that matches nothing) is the tool's
answer, ``error: ...``, which the model reads; it never fails the step. Every answer
says how long the call waited for the lock.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from pydantic_ai import Tool

from shared.db.session import transaction
from shared.manifest import Approach
from shared.store import REF_KEY, put_bytes
from workers.cmd0.display import display_problem
from workers.dom0.chromium import INSTALL_HINT, LAUNCH_ARGS, configured_chromium, system_chromium
from workers.screen.host import first_line
from workers.screen.lock import LockTimeout, machine_lock

# A dom0 or cmd0 step holds the lock for its whole run (up to max_step_timeout_s); a tool
# call waits for about one ordinary step, then says so, and the builder goes on with what
# it knows or tries again later, rather than sitting out its own step's time.
LOCK_TIMEOUT_S = 120.0
ACTION_TIMEOUT_S = 20.0  # starting Chromium, opening the page, the page a click opens
SELECTOR_TIMEOUT_S = 5.0  # for a fill or click selector to match: a typo fails fast
MAX_TEXT_CHARS = 4000
MAX_ELEMENTS = 60
MAX_WINDOWS = 40
XDOTOOL_TIMEOUT_S = 10.0

ANSWER = Any  # a dict the model reads as JSON, or an "error: ..." string

_BROWSE = MappingProxyType({
    "type": "object", "additionalProperties": False, "required": ["url"],
    "properties": {
        "url": {"type": "string", "description": "The http(s) address to open."},
        "fill": {"type": "object", "additionalProperties": {"type": "string"},
                 "description": "Text to type into fields once the page is open: CSS "
                                "selector -> text, filled in order."},
        "click": {"type": "string", "description": "A CSS selector to click after "
                  "filling (say a submit button); the page it leads to is described."}}})
SPECS: dict[str, tuple[str, MappingProxyType[str, Any]]] = {
    "browse": ("Open a web page in a headless Chromium on this machine, optionally fill "
               "fields and click one element, and see the page: its title, final url, "
               "visible text and its links, inputs and buttons, each with a CSS selector "
               "to use in the skill's browser actions. Waits while another browser step "
               "on this machine runs.", _BROWSE),
    "look_at_screen": ("See this machine's X desktop: the visible windows (name, "
                       "position, size) and a screenshot, kept in the artifact store "
                       "(its $ref). Waits while another desktop step on this machine "
                       "runs.", MappingProxyType({"type": "object",
                                                  "additionalProperties": False,
                                                  "properties": {}})),
}

# Each element a model may act on, with a selector that finds it again: its id, a unique
# name, else the nth-of-type path up from the nearest ancestor with an id.
_ELEMENTS_JS = """(max) => {
  const sel = (el) => {
    if (el.id) return '#' + CSS.escape(el.id);
    const tag = el.tagName.toLowerCase(), name = el.getAttribute('name');
    if (name) {
      const s = `${tag}[name="${CSS.escape(name)}"]`;
      if (document.querySelectorAll(s).length === 1) return s;
    }
    const parts = [];
    for (let e = el; e && e !== document.body; e = e.parentElement) {
      if (e.id) { parts.unshift('#' + CSS.escape(e.id)); return parts.join(' > '); }
      let i = 1;
      for (let s = e.previousElementSibling; s; s = s.previousElementSibling)
        if (s.tagName === e.tagName) i++;
      parts.unshift(`${e.tagName.toLowerCase()}:nth-of-type(${i})`);
    }
    return ['body', ...parts].join(' > ');
  };
  const found = [];
  let more = 0;
  for (const el of document.querySelectorAll(
      'a[href], input, textarea, select, button, [role=button]')) {
    const box = el.getBoundingClientRect();
    if (el.type === 'hidden' || box.width === 0 || box.height === 0) continue;
    if (found.length >= max) { more++; continue; }
    const tag = el.tagName.toLowerCase();
    const kind = tag === 'a' ? 'link' : (tag === 'button' || el.getAttribute('role') ===
      'button' || ['submit', 'button', 'reset'].includes(el.type)) ? 'button' : 'input';
    const text = (el.innerText || (kind === 'button' ? el.value : '') ||
      el.getAttribute('aria-label') || el.placeholder || el.title || '')
      .replace(/\\s+/g, ' ').trim().slice(0, 80);
    const item = {kind, selector: sel(el)};
    if (text) item.text = text;
    if (kind === 'link') item.href = el.href;
    if (kind === 'input') { item.type = el.type || tag; if (el.name) item.name = el.name; }
    found.push(item);
  }
  return {found, more};
}"""


class Failed(Exception):
    """What went wrong, in one line for the model."""


@dataclass
class ScreenTools:
    home: Path  # SKILLQ_HOME: its locks/ are the machine's
    database_url: str  # the shared store, for screenshots
    chromium_path: Path | None = None  # SKILLQ_CHROMIUM_PATH
    lock_timeout_s: float = LOCK_TIMEOUT_S

    def browse(self, url: str, fill: Mapping[str, str] | None = None,
               click: str = "") -> ANSWER:
        if urllib.parse.urlsplit(url.strip()).scheme not in ("http", "https"):
            return (f"error: '{url}' is not an http(s) address; browse opens web pages "
                    "only (no file: or other schemes); the dom0 lock was not waited for")
        try:
            chromium = configured_chromium(self.chromium_path) or system_chromium()
        except ValueError as exc:
            return f"error: {exc}; the dom0 lock was not waited for"
        return self._locked("dom0", lambda: _browse(chromium, url.strip(),
                                                    dict(fill or {}), click))

    def look_at_screen(self) -> ANSWER:
        problem = display_problem(os.environ)
        if problem:
            return f"error: {problem}; the cmd0 lock was not waited for"
        return self._locked("cmd0", lambda: self._look(os.environ["DISPLAY"]))

    def _locked(self, name: str, work: Callable[[], dict[str, Any]]) -> ANSWER:
        """``work``'s answer with the lock held, and how long it waited for it."""
        try:
            with machine_lock(self.home, name, timeout_s=self.lock_timeout_s) as waited_ms:
                waited = round(waited_ms / 1000, 2)
                try:
                    return {**work(), "lock_wait_s": waited}
                except Failed as exc:
                    reason = str(exc)
                except Exception as exc:  # a library's surprise: the model reads it too
                    reason = f"{type(exc).__name__}: {first_line(exc)}"
                return f"error: {reason} (waited {waited:g} s for the {name} lock)"
        except LockTimeout as exc:
            return (f"error: {exc} (waited {self.lock_timeout_s:g} s for the {name} lock); "
                    "try again later")

    def _look(self, display: str) -> dict[str, Any]:
        from PIL import ImageGrab

        windows = _windows()
        try:
            shot = ImageGrab.grab(xdisplay=display)
        except OSError as exc:
            raise Failed(f"cannot grab the X display {display!r}: {exc}") from None
        buffer = io.BytesIO()
        shot.save(buffer, format="PNG")
        data = buffer.getvalue()
        with transaction(self.database_url) as session:
            key = put_bytes(session, data, "image/png")
        return {"display": display, "windows": windows,
                "screenshot": {REF_KEY: key}, "width": shot.width, "height": shot.height,
                "bytes": len(data)}

    def tools(self, approach: Approach) -> list[Tool[None]]:
        """The tools of a builder of a skill with ``approach``: none unless dom0/cmd0."""
        calls: dict[Approach, tuple[str, Callable[..., ANSWER]]] = {
            Approach.DOM0: ("browse", self.browse),
            Approach.CMD0: ("look_at_screen", self.look_at_screen)}
        if approach not in calls:
            return []
        name, function = calls[approach]
        text, schema = SPECS[name]
        return [Tool.from_schema(function, name=name, description=text,
                                 json_schema=dict(schema))]


def _browse(chromium: str | None, url: str, fill: dict[str, str],
            click: str) -> dict[str, Any]:
    """Open ``url`` (then fill, then click) and describe the page it ends on."""
    try:
        from playwright.sync_api import Error as PlaywrightError
        from playwright.sync_api import sync_playwright
    except ModuleNotFoundError:
        raise Failed("Playwright is not installed on this worker: pip install "
                     "'skillq[screen]'") from None
    with sync_playwright() as pw:
        try:
            browser = pw.chromium.launch(executable_path=chromium, args=list(LAUNCH_ARGS),
                                         headless=True, timeout=ACTION_TIMEOUT_S * 1000)
        except PlaywrightError as exc:
            raise Failed(f"cannot start Chromium ({chromium or 'Playwright`s own'}: "
                         f"{first_line(exc)}); {INSTALL_HINT}") from None
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            context.set_default_timeout(ACTION_TIMEOUT_S * 1000)
            page = context.new_page()
            doing = f"open {url}"
            try:
                page.goto(url)
                for selector, text in fill.items():
                    doing = f"fill {selector!r}"
                    page.fill(selector, text, timeout=SELECTOR_TIMEOUT_S * 1000)
                if click:
                    doing = f"click {click!r}"
                    page.click(click, timeout=SELECTOR_TIMEOUT_S * 1000)
                    page.wait_for_load_state()
                doing = "read the page"
                body = page.evaluate("() => document.body ? document.body.innerText : ''")
                elements = page.evaluate(_ELEMENTS_JS, MAX_ELEMENTS)
                title, final_url = page.title(), page.url
            except PlaywrightError as exc:
                raise Failed(f"{doing} failed: {first_line(exc)}") from None
        finally:
            browser.close()
    text = str(body or "").strip()
    cut = f"\n[... {len(text) - MAX_TEXT_CHARS} more characters]" \
        if len(text) > MAX_TEXT_CHARS else ""
    described = {"title": title, "url": final_url, "text": text[:MAX_TEXT_CHARS] + cut,
                 "elements": elements["found"]}
    if elements["more"]:
        described["elements_left_out"] = elements["more"]
    return described


def _windows() -> list[dict[str, Any]] | str:
    """The visible named windows of the display in DISPLAY, or why they are not known."""
    xdotool = shutil.which("xdotool")
    if xdotool is None:
        return "unknown: xdotool is not installed on this worker (apt-get install xdotool)"

    def run(*args: str) -> str:
        return subprocess.run([xdotool, *args], capture_output=True, text=True, check=False,
                              timeout=XDOTOOL_TIMEOUT_S).stdout

    found = []
    for window in run("search", "--onlyvisible", "--name", ".").split()[:MAX_WINDOWS]:
        name, *lines = run("getwindowname", window, "getwindowgeometry", "--shell",
                           window).splitlines() or [""]
        shape = dict(line.split("=", 1) for line in lines if "=" in line)
        found.append({"id": int(window), "name": name, **{
            key.lower(): int(shape[key]) for key in ("X", "Y", "WIDTH", "HEIGHT")
            if shape.get(key, "").lstrip("-").isdigit()}})
    return found

