"""Isolation with real workers (issue 13): a skill that declares nothing reaches nothing
of its worker, the deployment or other skills; limits stop floods with a message that
names the limit; a step cut off the network cannot connect; the declared secret still
arrives. The worker runs as CI does (root), so its steps run as the step account in
bubblewrap (workers/sandbox/)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from conftest import VAULTS, RunResult, Stack, WorkerSpec, copy_vault, wait_until

pytestmark = pytest.mark.integration

RunSkill = Callable[..., RunResult]
DAEMON = "isod"  # every fixture skill of the isolation vault is pinned to it
TOKEN = "iso-value"


@pytest.fixture(scope="module")
def iso_worker(stack: Stack) -> Iterator[Stack]:
    """A worker of its own daemon whose environment holds decoys and one secret."""
    spec = WorkerSpec(DAEMON, f"default@{DAEMON}", 1)
    standard_env = stack.env
    stack.env = {**standard_env, "SKILLQ_DAEMON": DAEMON, "SKILLQ_SECRET_ISO_TOKEN": TOKEN,
                 "AWS_SECRET_ACCESS_KEY": "decoy-cloud-key"}
    try:
        stack.start_worker(spec)
    finally:
        stack.env = standard_env
    node = f"{DAEMON}@{DAEMON}"
    try:
        wait_until(lambda: stack.app.control.ping(destination=[node], timeout=0.5), 60,
                   f"worker {node} to answer", every_s=0.1)
        yield stack
    finally:
        stack.workers.pop(DAEMON).stop()


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    return copy_vault(VAULTS / "isolation", tmp_path / "vault")


def ports(stack: Stack) -> tuple[int, int]:
    redis = urlsplit(stack.endpoints.broker_url).port
    postgres = urlsplit(stack.endpoints.database_url).port
    assert redis and postgres
    return redis, postgres


def test_a_skill_that_declares_nothing_reaches_nothing(
        iso_worker: Stack, healthy: Stack, run_skill: RunSkill, vault: Path) -> None:
    redis_port, postgres_port = ports(iso_worker)
    other = vault / "offline"
    before = sorted(p.name for p in other.iterdir())
    done = run_skill("intruder", vault, "--json", inputs={
        "home": str(iso_worker.home), "other_skill": str(other),
        "redis_port": redis_port, "postgres_port": postgres_port})
    assert done.code == 0, done
    report = done.json()["report"]
    assert report["uid"] != 0 and report["uid"] != os.getuid()
    # Other processes: none visible but its own (PID namespace), no environment readable.
    leaked = {pid: names for pid, names in report["environments"].items()
              if any(n.startswith("SKILLQ_") or n == "AWS_SECRET_ACCESS_KEY" for n in names)}
    assert leaked == {}, leaked
    assert not any(n.startswith("SKILLQ_") and n not in ("SKILLQ_STEP_RUN", "SKILLQ_WORKDIR")
                   for n in report["own_env"]), report["own_env"]
    assert not report["parent_environ"]["ok"], report["parent_environ"]
    # SKILLQ_HOME: an empty folder in the sandbox but for the way down to the scratch
    # folders (the test's workers keep TMPDIR in it); secrets, state, keys unreadable.
    listing = report["home_listing"]
    assert not listing["ok"] or set(listing["value"]) <= {"tmp"}, listing
    assert not report["secrets_file"]["ok"] and not report["state_file"]["ok"], report
    # Another skill of the same vault: neither readable nor writable; its folder unchanged.
    assert not report["other_skill_read"]["ok"], report["other_skill_read"]
    assert not report["other_skill_write"]["ok"], report["other_skill_write"]
    assert sorted(p.name for p in other.iterdir()) == before
    assert report["own_folder_write"]["ok"], report["own_folder_write"]
    # The servers want credentials the step does not have.
    assert report["redis"]["ok"] and report["redis"]["value"].startswith("-NOAUTH"), report
    assert report["postgres"]["ok"] and report["postgres"]["value"] == "sasl", report


def failure(done: RunResult) -> str:
    assert done.code != 0, done
    return done.stderr


@pytest.mark.parametrize(("skill", "named"), [
    ("fork-flood", "process limit of 20"),
    ("memory-flood", "memory limit of 128 MB reached"),
    ("cpu-spin", "CPU time limit of 1 s"),
    ("big-file", "file size limit of 1 MB reached"),
    ("fd-flood", "open-file limit of 32 reached"),
])
def test_a_step_past_a_declared_limit_fails_naming_the_limit(
        iso_worker: Stack, healthy: Stack, run_skill: RunSkill, vault: Path,
        skill: str, named: str) -> None:
    done = run_skill(skill, vault)
    assert named in failure(done), done
    assert "killed by signal" not in done.stderr.split(named)[0], done


def test_a_program_the_sandbox_cannot_start_fails_the_step_saying_so(
        iso_worker: Stack, healthy: Stack, run_skill: RunSkill, vault: Path) -> None:
    done = run_skill("missing-program", vault)
    assert done.code == 1, done
    said = failure(done)
    assert "cannot start 'no-such-program-skillq --flag'" in said, done
    assert "No such file or directory" in said and "Traceback" not in done.stderr, done


def test_no_process_of_a_flood_outlives_its_step(
        iso_worker: Stack, healthy: Stack, run_skill: RunSkill, vault: Path) -> None:
    run_skill("fork-flood", vault)

    def sleepers() -> list[str]:
        found = []
        for entry in Path("/proc").iterdir():
            with contextlib.suppress(OSError):
                if entry.name.isdigit() and (entry / "cmdline").read_bytes() == b"sleep\x0030\x00":
                    found.append(entry.name)
        return found

    wait_until(lambda: not sleepers(), 10, "the flood's sleepers to be gone", every_s=0.1)


def test_a_step_without_network_cannot_connect_and_still_gets_its_secret(
        iso_worker: Stack, healthy: Stack, run_skill: RunSkill, vault: Path) -> None:
    redis_port, _ = ports(iso_worker)
    done = run_skill("offline", vault, "--json", inputs={"redis_port": redis_port})
    assert done.code == 0, done
    outputs = done.json()
    assert outputs["token_ok"] is True
    assert outputs["connect"] != "connected" and "Error" in outputs["connect"], outputs
