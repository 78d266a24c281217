"""The dashboard's guard over real HTTP: the Host check (DNS rebinding), form tokens,
the same-origin check and the size caps, against real `skillq dashboard` processes,
a real Chromium and the real stack (tests/integration/conftest.py).

Two dashboards serve the module over a copy of tests/integration/vaults/guard (``guard-hail``,
a skill no other module runs, so these runs change no other module's counts):
``plain`` with default settings, ``tight`` with SKILLQ_DASHBOARD_HOSTS=dash.example.test
and a small SKILLQ_INPUT_MAX_BYTES. The browser resolves evil.example (a page that
re-pointed its own name at this machine) and dash.example.test to 127.0.0.1.
Every refusal is checked against the database: no pipeline_runs row appears.
"""

from __future__ import annotations

import http.client
import json
import re
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from email.message import Message
from pathlib import Path

import pytest
from conftest import VAULTS, Stack, copy_vault
from playwright.sync_api import Browser, Page, expect, sync_playwright
from sqlalchemy import func, select
from test_dashboard import CHROMIUM, Served, cli, cli_message, free_port, serve, shot

from shared.db.models import PipelineRun

EXTRA_HOST = "dash.example.test"
FOREIGN_HOST = "evil.example"
CAP = 2048  # the tight dashboard's SKILLQ_INPUT_MAX_BYTES
MIB = 1024 * 1024
BODY_LIMIT = 8 * MIB + 64 * 1024  # the default cap's body limit (DashboardConfig)
TOKEN = re.compile(r'name="skillq-csrf" value="([0-9a-f]+)"')


@dataclass(frozen=True)
class Reply:
    status: int
    headers: Message
    text: str


def port_of(served: Served) -> int:
    port = urllib.parse.urlsplit(served.url).port
    assert port is not None
    return port


def request(served: Served, method: str, path: str, *, host: str | None = None,
            headers: dict[str, str] | None = None, body: bytes | None = None) -> Reply:
    """One HTTP request with exactly this Host header (a browser sends the name in its
    address bar; http.client sends what it is given)."""
    conn = http.client.HTTPConnection("127.0.0.1", port_of(served), timeout=60)
    try:
        conn.request(method, path, body=body,
                     headers={"Host": host or f"127.0.0.1:{port_of(served)}", **(headers or {})})
        response = conn.getresponse()
        return Reply(response.status, response.headers, response.read().decode(errors="replace"))
    finally:
        conn.close()


def session(served: Served, host: str | None = None) -> tuple[str, str]:
    """The cookie and form token a browser gets with the run form."""
    page = request(served, "GET", "/skills/guard-hail/run", host=host)
    assert page.status == 200, page.text
    found = TOKEN.search(page.text)
    assert found, page.text
    return page.headers["set-cookie"].split(";")[0], found[1]


def post_run(served: Served, fields: dict[str, str], *, cookie: str | None,
             token: str | None, host: str | None = None,
             headers: dict[str, str] | None = None, path: str = "/skills/guard-hail/run") -> Reply:
    form = {**fields, **({"skillq-csrf": token} if token is not None else {})}
    sent = {"Content-Type": "application/x-www-form-urlencoded", **(headers or {})}
    if cookie is not None:
        sent["Cookie"] = cookie
    return request(served, "POST", path, host=host, headers=sent,
                   body=urllib.parse.urlencode(form).encode())


def run_count(stack: Stack) -> int:
    with stack.db() as session_:
        found: int = session_.scalar(select(func.count()).select_from(PipelineRun)) or 0
        return found


def new_run_of(reply: Reply) -> str:
    assert reply.status == 303, (reply.status, reply.text)
    location = reply.headers["location"]
    assert location.startswith("/runs/run-"), location
    return location.rsplit("/", 1)[1]


@pytest.fixture(scope="module")
def vault(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_vault(VAULTS / "guard", tmp_path_factory.mktemp("guard") / "vault")


@pytest.fixture(scope="module")
def plain(stack: Stack, vault: Path) -> Iterator[Served]:
    stack.ensure_standard_workers()
    served = serve(stack, vault)
    yield served
    served.stop()


@pytest.fixture(scope="module")
def tight(stack: Stack, vault: Path) -> Iterator[Served]:
    stack.ensure_standard_workers()
    served = serve(stack, vault, env={"SKILLQ_DASHBOARD_HOSTS": f" {EXTRA_HOST} ,",
                                      "SKILLQ_INPUT_MAX_BYTES": str(CAP)})
    yield served
    served.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    rules = f"MAP {FOREIGN_HOST} 127.0.0.1, MAP {EXTRA_HOST} 127.0.0.1"
    with sync_playwright() as pw:
        launched = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=[
            f"--host-resolver-rules={rules}", "--no-proxy-server"])
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    opened.set_default_timeout(15_000)
    yield opened
    context.close()


def test_a_foreign_host_is_refused_for_get_and_post_and_starts_nothing(
        stack: Stack, plain: Served) -> None:
    port = port_of(plain)
    cookie, token = session(plain)
    before = run_count(stack)
    for host in (f"{FOREIGN_HOST}:{port}", FOREIGN_HOST, f"127.0.0.1:{port + 1}",
                 f"localhost.{FOREIGN_HOST}:{port}", f"{EXTRA_HOST}:{port}"):
        refused = request(plain, "GET", "/", host=host)
        assert refused.status == 400, (host, refused.text)
        assert "does not answer to the host" in refused.text and \
            "SKILLQ_DASHBOARD_HOSTS" in refused.text, refused.text
    # DNS rebinding with everything else right: the token of a page read through the
    # rebound name would be valid, so the Host header alone must stop it.
    posted = post_run(plain, {"name": "Mallory"}, cookie=cookie, token=token,
                      host=f"{FOREIGN_HOST}:{port}")
    assert posted.status == 400 and "SKILLQ_DASHBOARD_HOSTS" in posted.text, posted
    assert run_count(stack) == before
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"):
        assert request(plain, "GET", "/", host=host).status == 200, host


def test_a_rebinding_browser_gets_the_refusal_page(plain: Served, page: Page) -> None:
    response = page.goto(f"http://{FOREIGN_HOST}:{port_of(plain)}/skills/guard-hail/run")
    assert response is not None and response.status == 400
    expect(page.locator("h1")).to_have_text("Unknown host")
    expect(page.locator("#refusal")).to_contain_text("SKILLQ_DASHBOARD_HOSTS")
    expect(page.locator("#run-form")).to_have_count(0)
    shot(page, "guard-foreign-host")


def test_posts_need_the_token_of_the_rendered_form(stack: Stack, vault: Path,
                                                    plain: Served) -> None:
    port = port_of(plain)
    cookie, token = session(plain)
    other_cookie, other_token = session(plain)  # another browser's pair
    assert other_cookie != cookie and other_token != token
    before = run_count(stack)
    refused = {
        "no token": post_run(plain, {"name": "Ada"}, cookie=cookie, token=None),
        "wrong token": post_run(plain, {"name": "Ada"}, cookie=cookie, token="0" * 64),
        "another browser's token": post_run(plain, {"name": "Ada"}, cookie=cookie,
                                            token=other_token),
        "no cookie": post_run(plain, {"name": "Ada"}, cookie=None, token=token),
        "a planted cookie": post_run(plain, {"name": "Ada"}, token=token,
                                     cookie=f"skillq_csrf_{port}=chosen-by-the-attacker"),
        "a delete without a token": post_run(plain, {"force": "1"}, cookie=cookie,
                                             token=None, path="/skills/guard-hail/delete"),
    }
    for case, reply in refused.items():
        assert reply.status == 403, (case, reply.status, reply.text)
        assert "Form token missing or stale" in reply.text, (case, reply.text)
        assert "nothing was changed" in reply.text and "reload" in reply.text, reply.text
    for case, headers in {"Origin": {"Origin": f"http://{FOREIGN_HOST}:{port}"},
                          "Origin null": {"Origin": "null"},
                          "Referer": {"Referer": f"http://{FOREIGN_HOST}/page"}}.items():
        reply = post_run(plain, {"name": "Ada"}, cookie=cookie, token=token, headers=headers)
        assert reply.status == 403, (case, reply.text)
        assert "Cross-site request refused" in reply.text and "Nothing was changed" in \
            reply.text, (case, reply.text)
    assert run_count(stack) == before
    assert (vault / "guard-hail").is_dir()

    same_site = {"Origin": f"http://127.0.0.1:{port}",
                 "Referer": f"http://127.0.0.1:{port}/skills/guard-hail/run"}
    run_id = new_run_of(post_run(plain, {"name": "Ada"}, cookie=cookie, token=token,
                                 headers=same_site))
    by_header = new_run_of(post_run(plain, {"name": "Grace"}, cookie=other_cookie,
                                    token=None, headers={"X-Skillq-Csrf": other_token}))
    for started in (run_id, by_header):
        run = stack.wait_run(started)
        assert (run.triggered_by, run.state) == ("dashboard", "succeeded"), run.error
    assert run_count(stack) == before + 2


def test_every_rendered_form_carries_a_token(plain: Served, page: Page) -> None:
    for path in ("/skills/guard-hail", "/skills/guard-hail/run"):
        page.goto(plain.url + path)
        forms = page.locator("form[method=post]")
        assert forms.count() > 0, path
        for i in range(forms.count()):
            field = forms.nth(i).locator("input[type=hidden][name=skillq-csrf]")
            expect(field).to_have_count(1)
            assert TOKEN.fullmatch(f'name="skillq-csrf" value="{field.get_attribute("value")}"')


def test_the_configured_extra_host_is_served_and_its_form_starts_a_run(
        stack: Stack, tight: Served, page: Page) -> None:
    port = port_of(tight)
    for host in (f"{EXTRA_HOST}:{port}", EXTRA_HOST, f"{EXTRA_HOST}:443", f"127.0.0.1:{port}"):
        assert request(tight, "GET", "/", host=host).status == 200, host
    assert request(tight, "GET", "/", host=f"{FOREIGN_HOST}:{port}").status == 400

    before = stack.run_ids("guard-hail")
    page.goto(f"http://{EXTRA_HOST}:{port}/skills/guard-hail/run")
    page.fill("#in-name", "Lin")
    page.click("#start-button")
    page.wait_for_url(f"http://{EXTRA_HOST}:{port}/runs/run-*")
    run_id = page.url.rsplit("/", 1)[1]
    assert run_id not in before
    expect(page.locator("#run-state")).to_have_text("succeeded", timeout=45_000)
    expect(page.locator("#outputs")).to_contain_text("Hello, Lin!")
    shot(page, "guard-extra-host-run")
    assert stack.run(run_id).triggered_by == "dashboard"


def test_an_oversized_input_is_refused_by_the_form_and_by_the_cli(
        stack: Stack, vault: Path, tight: Served, page: Page, tmp_path: Path) -> None:
    before = run_count(stack)
    page.goto(tight.url + "/skills/guard-hail/run")
    page.fill("#in-name", "x" * (CAP + 1))
    page.click("#start-button")
    shown = page.locator("#error")
    expect(shown).to_be_visible()
    shot(page, "guard-input-too-large")
    from_form = " ".join(shown.inner_text().split())
    assert from_form == (f"--input: name: is {CAP + 1:,} bytes, over the {CAP:,}-byte cap "
                         f"on one input value: give less, or raise SKILLQ_INPUT_MAX_BYTES")

    refused = stack.cli("run", "guard-hail", "--input", f"name={'x' * (CAP + 1)}", "--vault",
                        str(vault), cwd=vault.parent, env={"SKILLQ_INPUT_MAX_BYTES": str(CAP)})
    assert refused.returncode == 2, refused
    assert cli_message(refused) == from_form and "Traceback" not in refused.stderr

    big = tmp_path / "inputs.json"  # the default cap, and a value no argv could hold
    big.write_text(json.dumps({"name": "é" * 600_000}), encoding="utf-8")
    from_file = cli(stack, vault, "run", "guard-hail", "--inputs-file", str(big))
    assert from_file.returncode == 2, from_file
    message = cli_message(from_file)
    assert "inputs.json: name: is 1,200,000 bytes, over the 1,048,576-byte cap on one " \
        "input value: give less, or raise SKILLQ_INPUT_MAX_BYTES" in message, message
    assert "Traceback" not in from_file.stderr
    assert run_count(stack) == before


def test_the_default_caps_hold_over_http(stack: Stack, plain: Served) -> None:
    cookie, token = session(plain)
    before = run_count(stack)
    # Past Starlette's own 1 MB field limit too: the refusal is the input check's.
    over = post_run(plain, {"name": "x" * (MIB + 1)}, cookie=cookie, token=token)
    assert over.status == 400, over.text[:500]
    assert f"--input: name: is {MIB + 1:,} bytes, over the {MIB:,}-byte cap" in over.text
    assert "SKILLQ_INPUT_MAX_BYTES" in over.text

    port = port_of(plain)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:  # refused by its Content-Length, before a byte of the body is read
        conn.putrequest("POST", "/skills/guard-hail/run", skip_host=True)
        for name, value in (("Host", f"127.0.0.1:{port}"), ("Cookie", cookie),
                            ("Content-Type", "application/x-www-form-urlencoded"),
                            ("Content-Length", str(BODY_LIMIT + 1))):
            conn.putheader(name, value)
        conn.endheaders()
        declared = conn.getresponse()
        text = declared.read().decode()
    finally:
        conn.close()
    assert declared.status == 413, text
    assert f"{BODY_LIMIT + 1:,} bytes" in text and "SKILLQ_INPUT_MAX_BYTES" in text, text

    body = urllib.parse.urlencode({"skillq-csrf": token, "name": "x" * BODY_LIMIT}).encode()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:  # chunked: no Content-Length to go by, so counted as it arrives
        conn.request("POST", "/skills/guard-hail/run", body=iter([body]), encode_chunked=True,
                     headers={"Host": f"127.0.0.1:{port}", "Cookie": cookie,
                              "Content-Type": "application/x-www-form-urlencoded"})
        streamed = conn.getresponse()
        text = streamed.read().decode()
    finally:
        conn.close()
    assert streamed.status == 413, text
    assert f"over {BODY_LIMIT:,} bytes" in text, text
    assert run_count(stack) == before


def test_a_bad_hosts_setting_stops_the_dashboard_before_it_listens(stack: Stack,
                                                                   vault: Path) -> None:
    refused = stack.cli("dashboard", "--port", str(free_port()), "--vault", str(vault),
                        cwd=vault.parent, timeout_s=60,
                        env={"SKILLQ_DASHBOARD_HOSTS": "ok.example, https://dash.example/"})
    assert refused.returncode == 2, refused
    assert "SKILLQ_DASHBOARD_HOSTS: 'https://dash.example/' is not a host name or " \
        "host:port" in cli_message(refused)
    assert "Traceback" not in refused.stderr
