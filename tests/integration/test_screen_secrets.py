"""``${secrets.NAME}`` in browser (dom0) and desktop (cmd0) actions, with real workers:
a real Chromium signs in to a page served on 127.0.0.1 with a password set through
`skillq secrets set`, and types a secret into a Tk window on a real X display (Xvfb).

The value must reach the page (or the window) and nothing else: not the action file the
host process reads, not the step's scratch folders while it runs, not the browser's
environment, not the database, SKILLQ_HOME (but its secrets file), the vault, the CLI's
output or an error naming a failed action.
"""

from __future__ import annotations

import html
import os
import secrets as tokens
import subprocess
import threading
import urllib.parse
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from conftest import (
    VAULTS,
    RunResult,
    Stack,
    copy_vault,
    free_port,
    skillq_argv,
    wait_until,
)
from PIL import ImageGrab
from sqlalchemy import select, text
from test_cmd0 import INSET_PX, note_app  # noqa: F401 - the Tk app fixture

from shared.db.notes_models import ImprovementNote
from workers.dom0.chromium import INSTALL_HINT, system_chromium

pytestmark = pytest.mark.integration

RunSkill = Callable[..., RunResult]
LOGIN = ("<html><body><h1>Sign in</h1><form action='/login' method='post'>"
         "<input id='user' name='user'><input id='password' name='password' "
         "type='password'><button type='submit'>Sign in</button></form></body></html>")


@dataclass
class Probe:
    """What the site saw of the step's process while it held the password: taken in the
    sign-in request, when the host has the value and the browser is mid-navigation."""

    folders: list[Path] = field(default_factory=list)  # the scratch and host folders
    files: list[str] = field(default_factory=list)
    hits: list[str] = field(default_factory=list)  # files holding the secret
    browser_pids: list[int] = field(default_factory=list)  # the step's, but its host
    leaky_env: list[str] = field(default_factory=list)


@dataclass
class Site:
    url: str
    password: str = ""
    key: str = ""
    user: str = ""
    probe: Probe | None = None
    sessions: set[str] = field(default_factory=set)


class Pages(BaseHTTPRequestHandler):
    server: ThreadingHTTPServer
    site: Site  # set on the class by the fixture

    def do_GET(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query)
        if url.path == "/login":
            self._send(200, LOGIN)
        elif not self._signed_in():
            self._send(403, "<html><body><p id='denied'>sign in first</p></body></html>")
        elif url.path == "/home":
            self._send(200, f"<html><body><p id='account'>Signed in as "
                       f"{html.escape(self.site.user)}</p></body></html>")
        elif url.path == "/report" and query.get("key") == [self.site.key]:
            # A careless page that shows the key it was given: an extract reads it.
            user = query.get("user", [""])[0]
            self._send(200, f"<html><body><p id='report'>3 open invoices for "
                       f"{html.escape(user)} (key {html.escape(self.site.key)})</p>"
                       "</body></html>")
        else:
            self._send(404, "<html><body>no such page</body></html>")

    def do_POST(self) -> None:
        size = int(self.headers.get("Content-Length") or 0)
        form = urllib.parse.parse_qs(self.rfile.read(size).decode())
        if form.get("password") != [self.site.password] or \
                form.get("user") != [self.site.user]:
            self._send(403, "<html><body><p id='denied'>wrong password</p></body></html>")
            return
        self.site.probe = probe_step(self.site.user, self.site.password)
        session = tokens.token_hex(8)
        self.site.sessions.add(session)
        self.send_response(303)
        self.send_header("Location", "/home")
        self.send_header("Set-Cookie", f"session={session}; Path=/")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _signed_in(self) -> bool:
        cookie = self.headers.get("Cookie") or ""
        return any(part.strip().removeprefix("session=") in self.site.sessions
                   for part in cookie.split(";") if part.strip().startswith("session="))

    def _send(self, status: int, body: str) -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *_: object) -> None:
        pass


def _environ(pid: int) -> dict[bytes, bytes]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    return dict(v.split(b"=", 1) for v in raw.split(b"\0") if b"=" in v)


def probe_step(user: str, secret: str) -> Probe:
    """Find the dom0 host running for ``user`` (by its inputs file) and look through
    its folders and the environments of the processes it started."""
    found = Probe()
    pids = [int(p.name) for p in Path("/proc").glob("[0-9]*")]
    envs = {pid: _environ(pid) for pid in pids}
    host = None
    for pid, env in envs.items():
        if b"SKILL_INPUTS" not in env or b"SKILLQ_SCREEN_SPEC" not in env:
            continue
        inputs = Path(env[b"SKILL_INPUTS"].decode())
        try:
            is_host = b"workers.dom0.host" in Path(f"/proc/{pid}/cmdline").read_bytes()
            mine = user in inputs.read_text()
        except OSError:
            continue
        if is_host and mine:
            host = pid
            found.folders = [inputs.parent, Path(env[b"SKILLQ_SCREEN_SPEC"].decode()).parent]
    if host is None:
        return found
    tag = envs[host][b"SKILLQ_SCREEN_TAG"]
    for pid, env in envs.items():
        if pid != host and env.get(b"SKILLQ_SCREEN_TAG") == tag:
            found.browser_pids.append(pid)
            if secret.encode() in Path(f"/proc/{pid}/environ").read_bytes():
                found.leaky_env.append(Path(f"/proc/{pid}/cmdline").read_bytes()[:80]
                                       .decode(errors="replace"))
    for folder in found.folders:
        found.files += [str(f) for f in folder.rglob("*") if f.is_file()]
    found.hits = files_holding(found.folders, [secret])
    return found


def files_holding(roots: list[Path], needles: list[str],
                  skip: frozenset[Path] = frozenset()) -> list[str]:
    """Every regular file under ``roots`` whose bytes hold one of ``needles``."""
    wanted = [n.encode() for n in needles]
    hits = []
    for root in roots:
        for top, _, names in os.walk(root):
            for name in names:
                path = Path(top) / name
                if path in skip or path.is_symlink() or not path.is_file():
                    continue
                try:
                    data = path.read_bytes()
                except OSError:  # gone meanwhile (a server's temporary file)
                    continue
                if any(n in data for n in wanted):
                    hits.append(str(path))
    return hits


def rows_holding(stack: Stack, needles: list[str]) -> list[str]:
    """Every table of the database with a row holding one of ``needles`` (as text, or
    as the hex a bytea column shows)."""
    forms = [*needles, *(n.encode().hex() for n in needles)]
    hits = []
    with stack.db() as session:
        tables = session.scalars(text("SELECT tablename FROM pg_tables "
                                      "WHERE schemaname = current_schema()")).all()
        assert "step_runs" in tables and "pipeline_runs" in tables, tables
        for table in tables:
            for row in session.scalars(text(f'SELECT CAST(t AS text) FROM "{table}" t')):
                if any(f in row for f in forms):
                    hits.append(f"{table}: {row[:200]}")
    return hits


def assert_nowhere(stack: Stack, vault: Path, values: list[str], *outputs: str) -> None:
    secrets_file = stack.home / "secrets.toml"
    assert all(v in secrets_file.read_text() for v in values)  # where `set` put them
    # ...and the only file of SKILLQ_HOME (logs, the servers' data, WAL included) that
    # holds any of them: the scan does see them where they are.
    assert files_holding([stack.home], values) == [str(secrets_file)]
    assert files_holding([vault], values) == []
    assert rows_holding(stack, values) == []
    for printed in outputs:
        assert not [v for v in values if v in printed], printed


def set_secret(stack: Stack, name: str, value: str, cwd: Path) -> None:
    """`skillq secrets set NAME`, the value on stdin (as a user pipes it)."""
    done = subprocess.run(skillq_argv("secrets", "set", name), input=value + "\n",
                          env=stack.cli_env, cwd=cwd, capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert value not in done.stdout + done.stderr


@pytest.fixture
def secrets_file(healthy: Stack) -> Iterator[Path]:
    """The stack's secrets file, put back as it was after the test (other modules'
    tests list this machine's secrets)."""
    path = healthy.home / "secrets.toml"
    before = path.read_bytes() if path.exists() else None
    yield path
    if before is None:
        path.unlink(missing_ok=True)
    else:
        path.write_bytes(before)
        path.chmod(0o600)


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    if system_chromium() is None:
        pytest.fail(f"no Chromium on this machine for the dom0 tests: {INSTALL_HINT}")
    server = ThreadingHTTPServer(("127.0.0.1", 0), Pages)
    Pages.site = Site(f"http://127.0.0.1:{server.server_port}")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Pages.site
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def signed_up(site: Site, healthy: Stack, secrets_file: Path, tmp_path: Path) -> Site:
    """This test's user, password and report key: the site expects them, the secrets
    file holds the two secrets."""
    site.user, site.probe = f"ada-{uuid.uuid4().hex[:8]}", None
    site.password, site.key = f"pw-{uuid.uuid4().hex}", f"key-{uuid.uuid4().hex}"
    set_secret(healthy, "site_password", site.password, tmp_path)
    set_secret(healthy, "report_key", site.key, tmp_path)
    return site


def test_a_browser_signs_in_with_a_secret_found_nowhere_else(
        run_skill: RunSkill, healthy: Stack, signed_up: Site, tmp_path: Path) -> None:
    site = signed_up
    vault = copy_vault(VAULTS / "screen-secrets", tmp_path / "vault")
    result = run_skill("sign-in", vault, "--json", inputs={
        "url": site.url, "user": site.user, "report_site": site.url})
    assert result.code == 0, result
    assert result.json() == {"account": f"Signed in as {site.user}",
                             "report": f"3 open invoices for {site.user} (key ***)"}

    probe = site.probe
    assert probe is not None and len(probe.folders) == 2, probe
    scratch, workspace = probe.folders
    assert str(workspace / "spec.json") in probe.files, probe  # the action file: read
    assert probe.hits == [], probe
    # Playwright's driver and Chromium started after the host took the secrets out of
    # its environment: none of them inherited one.
    assert probe.browser_pids and probe.leaky_env == [], probe
    for folder in (scratch, workspace):  # removed with the attempt; clean if not
        assert not folder.exists() or files_holding([folder], [site.password]) == []

    assert result.run_id is not None
    shown = healthy.cli("run-show", result.run_id, "--logs", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert_nowhere(healthy, vault, [site.password, site.key], result.stdout,
                   result.stderr, shown.stdout)


def test_a_failing_action_holding_a_secret_names_the_action_not_the_value(
        run_skill: RunSkill, healthy: Stack, signed_up: Site, tmp_path: Path) -> None:
    site = signed_up
    vault = copy_vault(VAULTS / "screen-secrets", tmp_path / "vault")
    wrong_field = run_skill("sign-in", vault, inputs={
        "url": site.url, "user": site.user, "report_site": site.url,
        "password_field": "#no-such"})
    assert wrong_field.code == 1, wrong_field
    expected = "browser.actions[2] (fill '#no-such') failed: nothing matched within 3 s"
    assert expected in wrong_field.stderr, wrong_field
    (step,) = healthy.steps(wrong_field.run_id or "")
    assert (step.error or "").startswith(expected), step.error

    closed = f"http://127.0.0.1:{free_port()}"  # Playwright's error quotes the url
    no_report = run_skill("sign-in", vault, inputs={
        "url": site.url, "user": site.user, "report_site": closed})
    assert no_report.code == 1, no_report
    (step,) = healthy.steps(no_report.run_id or "")
    action = (f"browser.actions[6] (goto '{closed}/report?user={site.user}"
              "&key=${secrets.report_key}') failed: ")
    assert (step.error or "").startswith(action), step.error
    assert "key=***" in (step.error or ""), step.error

    with healthy.db() as session:  # production failures: improvement notes, redacted
        notes = list(session.scalars(select(ImprovementNote).where(
            ImprovementNote.skill == "sign-in")))
    assert notes, "no improvement note for the failed sign-in"
    assert_nowhere(healthy, vault, [site.password, site.key], wrong_field.stdout,
                   wrong_field.stderr, no_report.stdout, no_report.stderr)


def test_an_undeclared_secret_is_refused_by_validation(
        healthy: Stack, run_skill: RunSkill, tmp_path: Path) -> None:
    vault = copy_vault(VAULTS / "screen-secrets", tmp_path / "vault")
    manifest = vault / "sign-in" / "SKILL.md"
    manifest.write_text(manifest.read_text().replace("auth: [site_password, report_key]\n",
                                                     "auth: [report_key]\n"))
    line = manifest.read_text().splitlines().index(
        "        value: ${secrets.site_password}") + 1
    checked = healthy.cli("validate", str(vault), cwd=tmp_path)
    assert checked.returncode == 1, checked
    # file:line, field, the secret, the fix
    assert (f"vault/sign-in/SKILL.md:{line}: browser.actions[2].fill.value: "
            "${secrets.site_password}: this skill does not declare the secret "
            "'site_password'; add it under auth (auth: [site_password]) and set it with "
            "`skillq secrets set site_password`") in checked.stdout, checked
    refused = run_skill("sign-in", vault, inputs={"url": "http://127.0.0.1:9",
                                                  "user": "ada", "report_site": "x"})
    assert refused.code != 0 and refused.run_id is None, refused
    assert "${secrets.site_password}" in refused.stderr, refused


def test_a_desktop_types_a_secret_found_nowhere_else(
        run_skill: RunSkill, healthy: Stack, xdisplay: str, secrets_file: Path,
        tmp_path: Path, note_app: tuple[Path, dict[str, Any]]) -> None:  # noqa: F811
    out, save = note_app
    vault = copy_vault(VAULTS / "screen-secrets", tmp_path / "vault")
    # The template is cut from the running app, so fonts of this machine match.
    box = (save["left"] + INSET_PX, save["top"] + INSET_PX,
           save["left"] + save["width"] - INSET_PX, save["top"] + save["height"] - INSET_PX)
    ImageGrab.grab(bbox=box, xdisplay=xdisplay).save(vault / "tk-secret-note" / "save.png")
    secret = f"note-{uuid.uuid4().hex}"  # lower case and digits: typed key by key
    set_secret(healthy, "note_secret", secret, tmp_path)

    result = run_skill("tk-secret-note", vault, "--json")
    assert result.code == 0, result
    lines = wait_until(lambda: out.is_file() and out.read_text().splitlines(), 5,
                       "the app's saved note")
    assert lines == [f"save: {secret}"]  # the window got it, key by key
    assert set(result.json()) == {"save_at"}
    assert_nowhere(healthy, vault, [secret], result.stdout, result.stderr)
