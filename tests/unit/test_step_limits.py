"""A step's limits: its SKILL.md over the daemon's settings, and the sentence a failed
step gets when it ran into one (workers/sandbox/limits.py)."""

from __future__ import annotations

import signal

import pytest
from pydantic import ValidationError

from shared.manifest import Limits, Manifest
from shared.settings import Settings
from workers.sandbox.limits import MB, Breaches, StepLimits, limit_reached

SETTINGS = Settings(_env_file=None, step_memory_mb=512, step_processes=64, step_cpu_s=30,
                    step_file_mb=10, step_open_files=128, step_network=False)


def test_declared_limits_win_and_the_rest_are_the_daemon_s() -> None:
    limits = StepLimits.resolve(Limits(memory_mb=128, network=True), SETTINGS)
    assert limits == StepLimits(memory_mb=128, processes=64, cpu_s=30, file_mb=10,
                                open_files=128, network=True)
    assert StepLimits.resolve(Limits(), SETTINGS).network is False


def test_rlimits_are_hard_and_memory_only_without_a_cgroup() -> None:
    limits = StepLimits.resolve(Limits(), SETTINGS)
    with_cgroup = limits.rlimits(memory=False, processes=False)
    assert with_cgroup["RLIMIT_FSIZE"] == (10 * MB, 10 * MB)
    assert with_cgroup["RLIMIT_NOFILE"] == (128, 128)
    assert with_cgroup["RLIMIT_CPU"] == (30, 31)  # SIGXCPU first, then the kill
    assert "RLIMIT_AS" not in with_cgroup
    assert limits.rlimits(memory=True, processes=False)["RLIMIT_AS"] == (512 * MB, 512 * MB)


@pytest.mark.parametrize(("code", "stderr", "breaches", "named"), [
    (-signal.SIGKILL, "", Breaches(memory=True), "memory limit of 512 MB reached"),
    (-signal.SIGXCPU, "", Breaches(), "CPU time limit of 30 s per process reached"),
    (-signal.SIGXFSZ, "", Breaches(), "file size limit of 10 MB reached"),
    (1, "BlockingIOError: [Errno 11] Resource temporarily unavailable", Breaches(processes=True),
     "process limit of 64 (processes and threads) reached"),
    (1, "OSError: [Errno 24] Too many open files: 'x'", Breaches(),
     "open-file limit of 128 reached"),
    (1, "MemoryError", Breaches(), "memory limit of 512 MB reached"),
])
def test_a_failure_past_a_limit_names_it(code: int, stderr: str, breaches: Breaches,
                                         named: str) -> None:
    limits = StepLimits.resolve(Limits(), SETTINGS)
    assert limit_reached(limits, code, stderr, breaches) == named


def test_a_plain_failure_names_no_limit() -> None:
    limits = StepLimits.resolve(Limits(), SETTINGS)
    assert limit_reached(limits, 1, "ValueError: bad input", Breaches()) is None


def test_limits_in_a_manifest_are_checked_by_name_and_range() -> None:
    with pytest.raises(ValidationError, match="memory_mb"):
        Manifest(name="x", description="d", limits={"memory_mb": 1})
    with pytest.raises(ValidationError, match="extra"):
        Manifest(name="x", description="d", limits={"memory": 64})
    assert Manifest(name="x", description="d", limits={"network": False}).limits.network is False
