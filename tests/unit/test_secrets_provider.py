"""The secret provider: environment variables, the owner-only secrets file, redaction."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from shared import secrets
from shared.errors import MissingSecret, SecretsFileError


def write_private(path: Path, text: str, mode: int = 0o600) -> Path:
    path.write_text(text, encoding="utf-8")
    path.chmod(mode)
    return path


def test_environment_first_then_file(tmp_path: Path) -> None:
    file = write_private(tmp_path / "secrets.toml", 'api_key = "from-file"\ntoken = "t0k"\n')
    env = {"SKILLQ_SECRET_API_KEY": "from-env"}
    assert secrets.secrets_for(["api_key", "token"], env, file) == {
        "api_key": "from-env", "token": "t0k"}


def test_no_auth_reads_nothing(tmp_path: Path) -> None:
    unsafe = write_private(tmp_path / "secrets.toml", 'x = "y"\n', mode=0o644)
    assert secrets.secrets_for([], {}, unsafe) == {}


def test_missing_secret_names_each_and_how_to_set_it(tmp_path: Path) -> None:
    file = write_private(tmp_path / "secrets.toml", 'have = "v"\n')
    with pytest.raises(MissingSecret) as caught:
        secrets.secrets_for(["have", "api_key", "db_pass"], {}, file)
    assert caught.value.names == ["api_key", "db_pass"]
    text = str(caught.value)
    assert "SKILLQ_SECRET_API_KEY" in text and "skillq secrets set db_pass" in text
    assert "have" not in caught.value.names


def test_missing_file_is_no_secrets(tmp_path: Path) -> None:
    with pytest.raises(MissingSecret):
        secrets.secrets_for(["a"], {}, tmp_path / "absent.toml")
    assert secrets.read_file(tmp_path / "absent.toml") == {}


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o660, 0o644])
def test_file_readable_by_others_is_refused_with_the_fix(tmp_path: Path, mode: int) -> None:
    file = write_private(tmp_path / "secrets.toml", 'api_key = "hunter2"\n', mode=mode)
    with pytest.raises(SecretsFileError) as caught:
        secrets.read_file(file)
    text = str(caught.value)
    assert str(file) in text and f"chmod 600 {file}" in text and f"{mode:04o}" in text
    assert "hunter2" not in text
    # The worker sees it as the secret being unavailable, with the reason.
    with pytest.raises(MissingSecret) as missing:
        secrets.secrets_for(["api_key"], {}, file)
    assert "chmod 600" in str(missing.value) and "hunter2" not in str(missing.value)


def test_malformed_file_names_the_file_and_quotes_no_value(tmp_path: Path) -> None:
    file = write_private(tmp_path / "secrets.toml", 'api_key = "unterminated\n')
    with pytest.raises(SecretsFileError, match="not valid TOML") as caught:
        secrets.read_file(file)
    assert str(file) in str(caught.value)
    file = write_private(tmp_path / "secrets.toml", "port = 5432\n[section]\nx = 'y'\n")
    with pytest.raises(SecretsFileError, match="port, section: a secret must be a string"):
        secrets.read_file(file)


def test_store_round_trips_awkward_values_and_keeps_the_file_private(tmp_path: Path) -> None:
    file = tmp_path / "home" / "secrets.toml"
    awkward = 'quote " back\\slash\nnew line \t tab \x7f del ünïcödé 🙂'
    secrets.store(file, "first", "plain")
    secrets.store(file, "second", awkward)
    secrets.store(file, "first", "changed")
    assert os.stat(file).st_mode & 0o777 == 0o600
    assert secrets.read_file(file) == {"first": "changed", "second": awkward}
    assert not [p for p in file.parent.iterdir() if p.name != "secrets.toml"]  # no temp left


def test_available_names_never_reads_values_out(tmp_path: Path) -> None:
    file = write_private(tmp_path / "secrets.toml", 'b_key = "vb"\na_key = "va"\n')
    names = secrets.available_names(file, {"SKILLQ_SECRET_A_KEY": "x", "OTHER": "y"})
    assert names == {"a_key": "env", "b_key": str(file)}


def test_values_for_is_whatever_is_available(tmp_path: Path) -> None:
    assert secrets.values_for(["a", "b"], {"SKILLQ_SECRET_B": "vb"},
                              tmp_path / "none.toml") == {"b": "vb"}


def test_redact_value_hides_values_anywhere_and_declared_keys_whole() -> None:
    found = {"api_key": "s3cr3t-value", "short": "abc"}
    inputs = {"url": "https://x.test/?key=s3cr3t-value", "api_key": "anything",
              "API_KEY_NOT": ["abc", {"nested": "pre-abc-post"}], "n": 3, "ok": True}
    assert secrets.redact_value(inputs, found, declared=["token"]) == {
        "url": "https://x.test/?key=***", "api_key": "***",
        "API_KEY_NOT": ["***", {"nested": "pre-***-post"}], "n": 3, "ok": True}
    # A declared secret this machine lacks still hides an input of that name.
    assert secrets.redact_value({"token": "t", "x": 1}, {}, declared=["token"]) == {
        "token": "***", "x": 1}


def test_redact_replaces_the_longest_secret_first() -> None:
    assert secrets.redact("key=abcdef", {"a": "abc", "b": "abcdef"}) == "key=***"


SKILLQ = Path(sys.executable).with_name("skillq")


def skillq(home: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKILLQ_")}
    env["SKILLQ_HOME"] = str(home)
    return subprocess.run([str(SKILLQ), *args], input=stdin, env=env, capture_output=True,
                          text=True, timeout=60, check=False)


def test_cli_set_reads_stdin_and_list_shows_names_only(tmp_path: Path) -> None:
    home = tmp_path / "home"
    done = skillq(home, "secrets", "set", "api_key", stdin="v@lue with spaces\n")
    assert done.returncode == 0, done.stderr
    assert secrets.read_file(home / "secrets.toml") == {"api_key": "v@lue with spaces"}
    listed = skillq(home, "secrets", "list")
    assert listed.returncode == 0 and "api_key" in listed.stdout
    assert "v@lue" not in listed.stdout + listed.stderr

    bad = skillq(home, "secrets", "set", "9lives", stdin="x")
    assert bad.returncode == 2 and "is not valid" in bad.stderr
    empty = skillq(home, "secrets", "set", "other", stdin="")
    assert empty.returncode == 2 and "no value given for other" in empty.stderr

    (home / "secrets.toml").chmod(0o644)
    refused = skillq(home, "secrets", "list")
    assert refused.returncode == 2 and "chmod 600" in refused.stderr
    assert "Traceback" not in refused.stderr and "v@lue" not in refused.stderr
