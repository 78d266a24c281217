"""`skillq dashboard` end to end: a real dashboard process, real Chromium (Playwright),
real workers, Redis and PostgreSQL (tests/integration/conftest.py).

One dashboard process serves the module, over a copy of tests/integration/vaults/dashboard:
``greet`` (a leaf that can pause or fail), ``welcome`` (two greet steps), ``tone``
(published, then rolled back), ``part``/``whole`` (a dependent stops a delete) and
``lone`` (disabled). A handful of real runs go through the CLI first (``history``).

Every page a test visits is saved as a screenshot under tests/integration/artifacts/
dashboard/ (printed at the end of the module).
"""

from __future__ import annotations

import base64
import contextlib
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from email.message import Message
from pathlib import Path

import pytest
from conftest import VAULTS, Stack, copy_vault, free_port, skillq_argv, wait_until
from playwright.sync_api import Browser, Page, expect, sync_playwright
from sqlalchemy import func, select

from shared.db.library_models import LibrarySkill
from shared.db.models import PipelineRun, StepRun
from shared.db.notes_models import ImprovementNote, TestResult
from shared.db.publish_models import PublishedVersion
from shared.db.schedule_models import Schedule

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = Path(__file__).parent / "artifacts" / "dashboard"
START_TIMEOUT_S = 60.0
LIVE_TIMEOUT_MS = 45_000


def http_status(url: str, auth: tuple[str, str] | None = None) -> tuple[int, Message]:
    """The status and headers (case-insensitive) of a GET."""
    request = urllib.request.Request(url)
    if auth is not None:
        token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.headers
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers


@dataclass
class Served:
    proc: subprocess.Popen[bytes]
    url: str
    log: Path

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def serve(stack: Stack, vault: Path, *, host: str = "127.0.0.1",
          env: dict[str, str] | None = None, auth: tuple[str, str] | None = None) -> Served:
    """`skillq dashboard` as a subprocess; returns once it answers HTTP."""
    port = free_port()
    log = ARTIFACTS / f"dashboard-{port}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as fh:
        proc = subprocess.Popen(
            skillq_argv("dashboard", "--host", host, "--port", str(port), "--vault", str(vault)),
            env={**stack.cli_env, **(env or {})}, cwd=vault.parent, stdin=subprocess.DEVNULL,
            stdout=fh, stderr=subprocess.STDOUT)
    served = Served(proc, f"http://127.0.0.1:{port}", log)

    def answering() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"the dashboard exited {proc.returncode}:\n"
                                 + log.read_text(errors="replace"))
        with contextlib.suppress(OSError):
            return http_status(served.url + "/", auth)[0] in (200, 401)
        return False

    try:
        wait_until(answering, START_TIMEOUT_S, "the dashboard to answer", every_s=0.2)
    except BaseException:
        served.stop()
        raise
    return served


@contextlib.contextmanager
def served_signed_in(stack: Stack, vault: Path, user: str, password: str
                     ) -> Iterator[Served]:
    """`serve` behind the dashboard's basic auth (SKILLQ_DASHBOARD_AUTH), stopped after."""
    dashboard = serve(stack, vault, env={"SKILLQ_DASHBOARD_AUTH": f"{user}:{password}"},
                      auth=(user, password))
    try:
        yield dashboard
    finally:
        dashboard.stop()


@pytest.fixture(scope="module")
def vault(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_vault(VAULTS / "dashboard", tmp_path_factory.mktemp("dash") / "vault")


@pytest.fixture(scope="module")
def dashboard(stack: Stack, vault: Path) -> Iterator[Served]:
    stack.ensure_standard_workers()
    served = serve(stack, vault)
    yield served
    served.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as pw:
        launched = pw.chromium.launch(executable_path=CHROMIUM, headless=True)
        yield launched
        launched.close()
    print(f"\ndashboard screenshots: {ARTIFACTS}")


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    opened.set_default_timeout(15_000)
    opened.on("dialog", lambda dialog: dialog.accept())  # the delete and rollback confirms
    yield opened
    context.close()


def shot(page: Page, name: str) -> Path:
    path = ARTIFACTS / f"{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path), full_page=True)
    print(f"screenshot: {path}")
    return path


def cli(stack: Stack, vault: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return stack.cli(*args, "--vault", str(vault), cwd=vault.parent)


def cli_message(proc: subprocess.CompletedProcess[str]) -> str:
    """What the CLI said after `error: `, whitespace folded."""
    text = proc.stderr.strip()
    assert text.startswith("error: "), proc.stderr
    return " ".join(text.removeprefix("error: ").split())


def run_cli(stack: Stack, vault: Path, skill: str, **inputs: str) -> tuple[int, str]:
    """`skillq run SKILL --input k=v ...`: exit code and the run it created."""
    before = stack.run_ids(skill)
    args = [a for k, v in inputs.items() for a in ("--input", f"{k}={v}")]
    proc = cli(stack, vault, "run", skill, *args)
    return proc.returncode, stack.new_run(skill, before)


def finished_runs(stack: Stack, skill: str) -> list[PipelineRun]:
    return [r for r in stack.runs_of(skill) if r.state in ("succeeded", "failed")]


@dataclass(frozen=True)
class History:
    greeted: list[str]
    failed: str
    welcomed: str


@pytest.fixture(scope="module")
def history(stack: Stack, vault: Path, dashboard: Served) -> History:
    """Real runs through the CLI: three greetings, one refused greeting, one welcome."""
    greeted = []
    for name in ("Ada", "Grace", "Edsger"):
        code, run_id = run_cli(stack, vault, "greet", name=name)
        assert code == 0, stack.run(run_id).error
        greeted.append(run_id)
    code, failed = run_cli(stack, vault, "greet", name="Bob", fail="true")
    assert code == 1
    code, welcomed = run_cli(stack, vault, "welcome", guest="Barbara")
    assert code == 0, stack.run(welcomed).error
    return History(greeted, failed, welcomed)


def test_pages_show_the_runs(stack: Stack, vault: Path, dashboard: Served, history: History,
                             page: Page) -> None:
    page.goto(dashboard.url + "/")
    shot(page, "skills")
    with stack.db() as session:  # a leaf's runs are its settled attempts, welcome's too
        greet_runs = session.scalar(select(func.count()).select_from(StepRun).where(
            StepRun.skill == "greet", StepRun.state.in_(("succeeded", "failed", "skipped"))))
    row = page.locator("tr.skill-row[data-skill=greet]")
    expect(row.locator("td.runs")).to_have_text(str(greet_runs))
    expect(page.locator("tr.skill-row[data-skill=welcome]")).to_contain_text("orchestrator")

    page.goto(dashboard.url + "/skills/greet")
    shot(page, "skill-greet")
    for chart in ("#duration-chart", "#cost-chart"):  # one point per finished run
        points = page.locator(f"{chart} svg.chart circle.point")
        expect(points).to_have_count(len(finished_runs(stack, "greet")))
        shown = {points.nth(i).get_attribute("data-run") for i in range(points.count())}
        assert shown == {r.id for r in finished_runs(stack, "greet")}
    for run_id in [*history.greeted, history.failed]:
        expect(page.locator(f"table.runs tr[data-run='{run_id}']")).to_have_count(1)
    expect(page.locator("#dependents")).to_contain_text("welcome (step 'hello', step 'host')")
    expect(page.locator("#manifest")).to_contain_text('"pause_s"')

    page.goto(dashboard.url + "/skills/welcome")
    shot(page, "skill-welcome")
    expect(page.locator("#graph svg g.node[data-key=greet]")).to_have_count(1)
    expect(page.locator("#graph svg g.node[data-key=welcome]")).to_have_count(1)

    page.goto(dashboard.url + "/runs")
    shot(page, "runs")
    for run_id in [history.welcomed, *history.greeted]:
        expect(page.locator(f"tr.run-row[data-run='{run_id}']")).to_have_count(1)

    page.goto(f"{dashboard.url}/runs/{history.welcomed}")
    shot(page, "run-welcome")
    expect(page.locator("#run-state")).to_have_text("succeeded")
    expect(page.locator("#live")).to_have_count(0)
    for step in stack.steps(history.welcomed):
        row = page.locator(f"tr.step-row[data-step='{step.step_id}']")
        expect(row).to_contain_text("succeeded")
        assert step.daemon, step.id
        expect(row).to_contain_text(step.daemon)
    expect(page.locator("#graph svg g.node.state-succeeded")).to_have_count(2)
    expect(page.locator("#outputs")).to_contain_text("Hello, Barbara!")

    with stack.db() as session:
        daemons = [d for d, in session.execute(select(func.distinct(StepRun.daemon)).where(
            StepRun.run_id == history.welcomed)).all()]
    page.goto(dashboard.url + "/daemons")
    shot(page, "daemons")
    for name in daemons:
        expect(page.locator(f"tr.daemon-row[data-daemon='{name}']")).to_contain_text("online")


def test_schedules_pause_from_the_page(stack: Stack, vault: Path, dashboard: Served,
                                       page: Page) -> None:
    added = cli(stack, vault, "schedule", "add", "greet", "--cron", "0 7 * * *",
                "--input", "name=Ada")
    assert added.returncode == 0, added.stderr
    schedule_id = int(added.stdout.split()[1].rstrip(":"))
    page.goto(dashboard.url + "/schedules")
    row = page.locator(f"tr.schedule-row[data-schedule='{schedule_id}']")
    expect(row).to_contain_text("active")
    row.get_by_role("button", name="Pause").click()
    expect(page.locator("#message")).to_have_text(f"schedule {schedule_id} (greet) paused")
    shot(page, "schedules")
    with stack.db() as session:
        assert session.get(Schedule, schedule_id).paused  # type: ignore[union-attr]


def test_failed_run_shows_the_step_its_error_and_its_note(
        stack: Stack, dashboard: Served, history: History, page: Page) -> None:
    run = stack.run(history.failed)
    failing = [s for s in stack.steps(history.failed) if s.state == "failed"]
    assert run.failed_step and failing, run
    with stack.db() as session:
        notes = list(session.scalars(select(ImprovementNote).where(
            ImprovementNote.skill == "greet")))
        session.expunge_all()
    # The production failure left one note (workers/failure_notes.py), on this step.
    assert [(n.step_id, n.run_id) for n in notes] == [(run.failed_step, history.failed)]
    note = notes[0]
    page.goto(f"{dashboard.url}/runs/{history.failed}")
    shot(page, "run-failed")
    expect(page.locator("#run-state")).to_have_text("failed")
    expect(page.locator("#failed-step")).to_have_text(run.failed_step)
    expect(page.locator("#run-error")).to_contain_text("refusing to greet Bob")
    expect(page.locator(f"tr.step-row[data-step='{run.failed_step}'] pre.step-error")
           ).to_contain_text(failing[0].error or "")
    expect(page.locator(f".failed-attempt .note[data-note='{note.id}']")
           ).to_contain_text(note.summary)

    page.goto(dashboard.url + "/")
    expect(page.locator("tr.skill-row[data-skill=greet] .badge.notes")).to_have_text(
        "1 open note")
    page.goto(dashboard.url + "/notes")
    shot(page, "notes")
    note_row = page.locator(f"tr.note-row[data-note='{note.id}']")
    expect(note_row).to_contain_text("refusing to greet Bob")
    note_row.locator("button.note-wontfix").click()
    expect(page.locator("#message")).to_have_text(
        f"✓ note {note.id} (greet step {note.step_id}) is now wontfix")
    with stack.db() as session:
        assert session.get(ImprovementNote, note.id).status == "wontfix"  # type: ignore[union-attr]


def test_run_tests_records_each_case_result(stack: Stack, dashboard: Served,
                                            page: Page) -> None:
    page.goto(dashboard.url + "/skills/greet")
    page.click("#test-button")
    expect(page.locator("#message")).to_contain_text("running 1 test case(s) of greet")

    def recorded() -> TestResult | None:
        with stack.db() as session:
            found = session.scalars(select(TestResult).where(TestResult.skill == "greet")
                                    ).first()
            if found is not None:
                session.expunge(found)
            return found

    result = wait_until(recorded, 60, "greet's test result")
    assert result.passed and result.run_id, result.problems
    page.goto(dashboard.url + "/skills/greet")
    row = page.locator("tr.test-row[data-test=hello]")
    expect(row).to_contain_text("passed")
    expect(row.locator("a")).to_have_attribute("href", f"/runs/{result.run_id}")
    shot(page, "skill-tests-passed")


def test_a_run_started_from_the_form_appears_live(stack: Stack, dashboard: Served,
                                                  page: Page) -> None:
    before = stack.run_ids("greet")
    page.goto(dashboard.url + "/skills/greet/run")
    shot(page, "run-form")
    page.fill("#in-name", "Hedy")
    page.fill("#in-pause_s", "3")
    page.click("#start-button")
    page.wait_for_url(f"{dashboard.url}/runs/run-*")
    run_id = page.url.rsplit("/", 1)[1]
    assert run_id not in before
    expect(page.locator("#live")).to_be_visible()  # still running: the page refreshes
    expect(page.locator("#run-state")).not_to_have_text("succeeded")
    shot(page, "run-live")
    expect(page.locator("#run-state")).to_have_text("succeeded", timeout=LIVE_TIMEOUT_MS)
    expect(page.locator("#outputs")).to_contain_text("Hello, Hedy!")
    shot(page, "run-live-done")
    run = stack.run(run_id)
    assert (run.triggered_by, run.source, run.state) == ("dashboard", "production", "succeeded")


def test_a_wrong_input_shows_the_cli_message_and_starts_nothing(
        stack: Stack, vault: Path, dashboard: Served, page: Page) -> None:
    before = stack.run_ids("greet")
    refused = cli(stack, vault, "run", "greet", "--input", "name=Ada", "--input",
                  "pause_s=soon")
    assert refused.returncode == 2, refused.stderr
    page.goto(dashboard.url + "/skills/greet/run")
    page.fill("#in-name", "Ada")
    page.fill("#in-pause_s", "soon")
    page.click("#start-button")
    shown = page.locator("#error")
    expect(shown).to_be_visible()
    shot(page, "run-form-refused")
    assert " ".join(shown.inner_text().split()) == cli_message(refused)
    expect(page.locator("#in-pause_s")).to_have_value("soon")  # the form keeps what was typed
    assert stack.run_ids("greet") == before


def test_disable_does_what_the_cli_does(stack: Stack, vault: Path, dashboard: Served,
                                        page: Page) -> None:
    page.goto(dashboard.url + "/skills/lone")
    page.click("#disable-button")
    expect(page.locator("#message")).to_have_text("lone: disabled")
    expect(page.locator("h1 .badge.disabled")).to_be_visible()
    shot(page, "skill-disabled")
    with stack.db() as session:
        row = session.scalars(select(LibrarySkill).where(LibrarySkill.name == "lone")).one()
        assert row.enabled is False
    refused = cli(stack, vault, "run", "lone", "--input", "text=x")
    assert refused.returncode != 0 and "'lone' is disabled" in refused.stderr
    page.goto(dashboard.url + "/skills/lone/run")
    page.fill("#in-text", "x")
    page.click("#start-button")
    assert " ".join(page.locator("#error").inner_text().split()) == cli_message(refused)
    assert stack.run_ids("lone") == set()


def test_delete_with_dependents_is_refused_then_forced(stack: Stack, vault: Path,
                                                       dashboard: Served, page: Page) -> None:
    refused = cli(stack, vault, "delete", "part")
    assert refused.returncode != 0
    page.goto(dashboard.url + "/skills/part")
    page.click("#delete-button")
    expect(page.locator("#error")).to_contain_text("whole (step 'piece')")
    assert " ".join(page.locator("#error").inner_text().split()) == cli_message(refused)
    assert (vault / "part").is_dir()
    shot(page, "delete-refused")
    page.click("#force-button")
    expect(page.locator("#message")).to_contain_text("deleted part: folder moved to")
    expect(page.locator("tr.deleted-row[data-skill=part]")).to_contain_text("deleted")
    expect(page.locator("tr.skill-row[data-skill=part]")).to_have_count(0)
    shot(page, "deleted")
    assert not (vault / "part").exists()
    assert [p.name.split("-")[0] for p in (vault / ".deleted").iterdir()] == ["part"]
    with stack.db() as session:
        row = session.scalars(select(LibrarySkill).where(LibrarySkill.slug == "part")).one()
        assert row.name is None and row.deleted_at is not None


def test_rollback_publishes_the_old_files_as_a_new_version(
        stack: Stack, vault: Path, dashboard: Served, page: Page) -> None:
    folder = vault / "tone"
    for word in ("hello", "howdy"):
        if word != "hello":
            (folder / "tone.txt").chmod(0o644)
            (folder / "tone.txt").write_text(word + "\n")
        published = cli(stack, vault, "publish", "tone")
        assert published.returncode == 0, published.stderr
    page.goto(dashboard.url + "/skills/tone")
    expect(page.locator("tr.version-row")).to_have_count(2)
    page.select_option("#rollback-to", "1")
    page.click("#rollback-button")
    expect(page.locator("#message")).to_contain_text("published tone v3 (rollback of v1)")
    expect(page.locator("tr.version-row[data-version='3']")).to_contain_text("rollback of v1")
    with stack.db() as session:
        row = session.get(PublishedVersion, ("tone", 3))
        assert row is not None and row.rolled_back_from == 1
    assert (folder / "tone.txt").read_text() == "hello\n"
    assert "version: 3\n" in (folder / "SKILL.md").read_text()

    code, run_id = run_cli(stack, vault, "tone", who="ada")
    assert code == 0 and stack.run(run_id).version == 3
    page.goto(dashboard.url + "/skills/tone")
    shot(page, "skill-rolled-back")
    points = page.locator("#duration-chart svg.chart circle.point")
    expect(points).to_have_count(len(finished_runs(stack, "tone")))
    versions = {points.nth(i).get_attribute("data-version") for i in range(points.count())}
    assert versions == {"1", "2", "3"}  # each publish's test run, then the run of v3
    expect(page.locator("#duration-chart .version-label")).to_have_count(3)


def test_bind_refused_without_credentials_and_401_with_them(
        stack: Stack, vault: Path, browser: Browser) -> None:
    env = {k: v for k, v in stack.cli_env.items() if k != "SKILLQ_DASHBOARD_AUTH"}
    refused = subprocess.run(
        skillq_argv("dashboard", "--host", "0.0.0.0", "--port", str(free_port()),
                    "--vault", str(vault)),
        env=env, capture_output=True, text=True, timeout=60, check=False)
    assert refused.returncode == 2, refused
    assert "refusing to serve the dashboard on 0.0.0.0 without authentication" in \
        refused.stderr and "SKILLQ_DASHBOARD_AUTH=USER:PASSWORD" in refused.stderr
    assert "Traceback" not in refused.stderr

    creds = ("ada", "s3cret-pass")
    served = serve(stack, vault, host="0.0.0.0",
                   env={"SKILLQ_DASHBOARD_AUTH": ":".join(creds)}, auth=creds)
    try:
        for path in ("/", "/runs", "/skills/greet", "/notes"):
            status, headers = http_status(served.url + path)
            assert status == 401, path
            assert (headers.get("WWW-Authenticate") or "").startswith("Basic "), path
        assert http_status(served.url + "/", ("ada", "wrong"))[0] == 401
        assert http_status(served.url + "/", creds)[0] == 200
        context = browser.new_context(http_credentials={"username": creds[0],
                                                        "password": creds[1]})
        try:
            page = context.new_page()
            page.goto(served.url + "/daemons")
            expect(page.locator("h1")).to_have_text("Daemons")
            shot(page, "with-credentials")
        finally:
            context.close()
        assert "s3cret-pass" not in served.log.read_text(errors="replace")
    finally:
        served.stop()
