"""The signed envelope of task messages (shared/envelope.py) and the daemon key it is
signed with (shared/daemon_key.py): no services, real Ed25519 keys."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

from shared import daemon_key
from shared.envelope import CONTENT_TYPE, due_at, open_envelope, seal
from shared.errors import DaemonKeyError, KeyRegistryError, MessageRefused

NOW = 1_800_000_000.0
BODY = [["run-1/step/-1/1"], {}, {"callbacks": None, "errbacks": None, "chain": None,
                                  "chord": None}]


@pytest.fixture
def key(tmp_path: Path) -> daemon_key.DaemonKey:
    return daemon_key.load_or_create(tmp_path / "home")


def sealed(key: daemon_key.DaemonKey, **overrides: Any) -> str:
    options: dict[str, Any] = {"task": "skillq.execute_step", "task_id": "run-1/step/-1/1",
                               "eta": None, "ttl_s": 86400, "now": NOW}
    options.update(overrides)
    return seal(BODY, key, **options)


def altered(text: str, **fields: Any) -> str:
    data = json.loads(text)
    data.update(fields)
    return json.dumps(data)


def test_a_sealed_body_opens_verified_and_as_sent(key: daemon_key.DaemonKey) -> None:
    env = open_envelope(sealed(key).encode())
    env.verify(key.public)
    env.check_time(NOW, skew_s=0)
    assert env.payload() == BODY
    assert (env.key, env.task, env.id, env.eta) == (key.fingerprint, "skillq.execute_step",
                                                    "run-1/step/-1/1", None)
    assert env.issued_at == int(NOW) and env.expires_at == int(NOW) + 86400 + 1
    assert CONTENT_TYPE == "application/x-skillq-signed"


def test_each_message_has_a_nonce_of_its_own(key: daemon_key.DaemonKey) -> None:
    assert open_envelope(sealed(key)).nonce != open_envelope(sealed(key)).nonce


@pytest.mark.parametrize("field, value", [
    ("body", json.dumps([["run-1/other/-1/1"], {}, {}])),  # another step's id
    ("task", "skillq.advance"),
    ("id", "run-2/step/-1/1"),
    ("eta", "2027-01-01T00:00:00+00:00"),
    ("expires_at", int(NOW) + 10 * 86400),  # made to live longer
    ("issued_at", int(NOW) + 5),
    ("nonce", "AAAAAAAAAAAAAAAAAAAAAA"),  # a replay dressed up as new
])
def test_a_tampered_field_breaks_the_signature(key: daemon_key.DaemonKey, field: str,
                                               value: Any) -> None:
    env = open_envelope(altered(sealed(key), **{field: value}))
    with pytest.raises(MessageRefused, match="bad signature") as caught:
        env.verify(key.public)
    assert caught.value.key == key.fingerprint


def test_a_signature_by_another_key_is_refused(key: daemon_key.DaemonKey,
                                               tmp_path: Path) -> None:
    other = daemon_key.load_or_create(tmp_path / "other-home")
    # Signed by `other` but naming `key`: the named key's check fails.
    forged = altered(sealed(other), key=key.fingerprint)
    with pytest.raises(MessageRefused, match="bad signature"):
        open_envelope(forged).verify(key.public)
    with pytest.raises(MessageRefused, match="bad signature"):
        open_envelope(sealed(key)).verify(other.public)


@pytest.mark.parametrize("mangle, why", [
    (lambda t: t[:-5], "malformed"),  # cut short: not JSON
    (lambda t: json.dumps({k: v for k, v in json.loads(t).items() if k != "nonce"}),
     "not an envelope"),
    (lambda t: altered(t, extra="x"), "not an envelope"),
    (lambda t: t[:-1] + ',"body":"[]"}', "appears twice"),
    (lambda t: altered(t, sig="c2hvcnQ"), "not 64 bytes"),
    (lambda t: altered(t, v=2), "version 2"),
    (lambda t: altered(t, v=True), "version True"),
    (lambda t: altered(t, issued_at="now"), "whole number"),
    (lambda t: altered(t, task=["x"]), "task is not a string"),
    (lambda t: json.dumps([1, 2]), "not an envelope"),
    (lambda t: "\udcff", "malformed"),
])
def test_a_malformed_envelope_is_refused_before_any_check(key: daemon_key.DaemonKey,
                                                          mangle: Any, why: str) -> None:
    text = mangle(sealed(key))
    with pytest.raises(MessageRefused, match=why):
        open_envelope(text.encode("utf-8", "surrogateescape"))


def test_plain_json_is_not_an_envelope() -> None:
    with pytest.raises(MessageRefused, match="not an envelope"):
        open_envelope(json.dumps(BODY).encode())


def test_clock_skew_is_allowed_up_to_the_setting(key: daemon_key.DaemonKey) -> None:
    env = open_envelope(sealed(key, now=NOW + 200))  # the sender's clock runs 200 s ahead
    env.check_time(NOW, skew_s=300)
    with pytest.raises(MessageRefused, match="issued 200 s in the future"):
        env.check_time(NOW, skew_s=100)


def test_expiry_is_checked_with_the_same_allowance(key: daemon_key.DaemonKey) -> None:
    env = open_envelope(sealed(key, ttl_s=60))  # valid until NOW + 61
    env.check_time(NOW + 61, skew_s=0)
    env.check_time(NOW + 61 + 299, skew_s=300)  # this worker's clock runs ahead
    with pytest.raises(MessageRefused, match="expired 1 s ago"):
        env.check_time(NOW + 62, skew_s=0)


def test_a_message_with_an_eta_lives_from_its_eta(key: daemon_key.DaemonKey) -> None:
    eta = "2027-02-01T00:00:00+00:00"  # NOW is 2027-01-15 08:00 UTC
    due = due_at(eta, NOW)
    assert due > NOW
    env = open_envelope(sealed(key, eta=eta, ttl_s=60))
    assert env.expires_at == int(due + 60) + 1
    env.check_time(due + 30, skew_s=0)
    assert due_at("not a time", NOW) == NOW and due_at(None, NOW) == NOW
    assert due_at("2000-01-01T00:00:00+00:00", NOW) == NOW  # overdue: due now


# -- the daemon key ---------------------------------------------------------------------

def test_the_key_is_made_private_from_the_start_and_kept(tmp_path: Path) -> None:
    home = tmp_path / "home"
    made = daemon_key.load_or_create(home)
    assert made.path == home / "keys" / "daemon.key"
    assert stat.S_IMODE(made.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(made.path.parent.stat().st_mode) == 0o700
    assert not [p for p in made.path.parent.iterdir() if p != made.path]  # no temp left
    assert daemon_key.load_or_create(home).fingerprint == made.fingerprint


def test_processes_starting_together_agree_on_one_key(tmp_path: Path) -> None:
    home = tmp_path / "home"
    found: list[str] = []
    start = threading.Barrier(8)

    def make() -> None:
        start.wait()
        # the module lock serialises threads; _create is what processes race on
        daemon_key._create(daemon_key.key_path(home))
        found.append(daemon_key.load_or_create(home).fingerprint)

    threads = [threading.Thread(target=make) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(found)) == 1 and len(found) == 8


def test_a_key_readable_by_others_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    path = daemon_key.load_or_create(home).path
    os.chmod(path, 0o644)
    with pytest.raises(DaemonKeyError, match="chmod 600"):
        daemon_key.load_or_create(home)


def test_a_damaged_key_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    path = daemon_key.load_or_create(home).path
    path.write_text("not a key")
    with pytest.raises(DaemonKeyError, match="cannot be read"):
        daemon_key.load_or_create(home)


def test_the_public_line_round_trips_with_its_daemon(key: daemon_key.DaemonKey,
                                                     tmp_path: Path) -> None:
    line = key.public_text("laptop")
    assert line.startswith("ssh-ed25519 ") and line.endswith(" skillq:laptop")
    parsed = daemon_key.parse_public(line + "\n")
    assert (parsed.fingerprint, parsed.daemon) == (key.fingerprint, "laptop")
    assert daemon_key.parse_public(parsed.text).daemon is None
    # The fingerprint is the one OpenSSH prints for the same line.
    pub = tmp_path / "k.pub"
    pub.write_text(line + "\n")
    shown = subprocess.run(["ssh-keygen", "-lf", str(pub)], capture_output=True, text=True,
                           check=True).stdout.split()
    assert shown[1] == key.fingerprint


@pytest.mark.parametrize("text", ["", "ssh-rsa AAAAB3NzaC1yc2E", "ssh-ed25519 !!!",
                                  "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----"])
def test_what_is_not_a_daemon_public_key_is_refused(text: str) -> None:
    with pytest.raises(KeyRegistryError):
        daemon_key.parse_public(text)
