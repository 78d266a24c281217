"""``${secrets.NAME}`` in browser and desktop actions: what validation refuses, and the
action file the worker writes for the host process (names, never values)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shared.screen_secrets import SecretRefError, filled, spelled, split_secrets
from shared.settings import Settings
from shared.vault import load_vault
from workers.executors.screen_run import host_spec

SIGN_IN = """---
name: sign-in
description: Sign in to a site. Use it in tests.
version: 1
approach: dom0
auth: [site_password, report_key]
inputs:
  - name: url
    type: string
    required: true
  - name: user
    type: string
    required: true
outputs:
  - name: account
    type: string
browser:
  actions:
    - goto: ${inputs.url}/login
    - fill:
        selector: "#user"
        value: ${inputs.user}
    - fill:
        selector: "#password"
        value: ${secrets.site_password}
    - click: "button[type=submit]"
    - goto: ${inputs.url}/report?user=${inputs.user}&key=${secrets.report_key}
    - extract:
        selector: "#account"
        output: account
---

Body.
"""
TYPE_NOTE = """---
name: type-note
description: Type a secret note. Use it in tests.
version: 1
approach: cmd0
auth: [note_secret]
desktop:
  actions:
    - click:
        x: 10
        y: 10
    - type: ${secrets.note_secret}
---

Body.
"""


def problems(tmp_path: Path, text: str) -> list[str]:
    folder = tmp_path / "vault" / text.split("name: ", 1)[1].split("\n", 1)[0]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(text)
    return [f"{p.field}: {p.message}" for p in load_vault(tmp_path / "vault").problems]


def test_declared_secrets_in_a_url_a_fill_value_and_a_type_text_are_valid(
        tmp_path: Path) -> None:
    assert problems(tmp_path, SIGN_IN) == []
    assert problems(tmp_path / "2", TYPE_NOTE) == []


@pytest.mark.parametrize(("text", "change", "expected"), [
    (SIGN_IN, ("auth: [site_password, report_key]", "auth: [report_key]"),
     "browser.actions[2].fill.value: ${secrets.site_password}: this skill does not declare "
     "the secret 'site_password'; add it under auth (auth: [site_password]) and set it "
     "with `skillq secrets set site_password`"),
    (SIGN_IN, ("auth: [site_password, report_key]\n", ""),
     "browser.actions[4].goto.url: ${secrets.report_key}: this skill does not declare the "
     "secret 'report_key'"),
    (TYPE_NOTE, ("auth: [note_secret]\n", ""),
     "desktop.actions[1].type.text: ${secrets.note_secret}: this skill does not declare "
     "the secret 'note_secret'"),
    (SIGN_IN, ('- click: "button[type=submit]"', "- click: ${secrets.site_password}"),
     "browser.actions[3].click.selector: ${secrets.site_password}: a secret may stand only "
     "in a goto url, a fill value or a type text (this field is shown in errors and "
     "logs); move it there"),
    (SIGN_IN, ("${secrets.site_password}", "${secrets}"),
     "browser.actions[2].fill.value: '${secrets}' is not a secret reference; write "
     "${secrets.NAME}"),
    (SIGN_IN, ("${secrets.site_password}", "${secrets.site.password}"),
     "browser.actions[2].fill.value: '${secrets.site.password}' is not a secret reference"),
    (SIGN_IN, ("${secrets.site_password}", "${steps.a.outputs.b}"),
     "browser.actions[2].fill.value: ${steps.a.outputs.b}: actions see only this skill's "
     "inputs and declared secrets; write ${inputs.NAME} or ${secrets.NAME}"),
])
def test_validation_names_the_field_and_the_secret(
        tmp_path: Path, text: str, change: tuple[str, str], expected: str) -> None:
    assert change[0] in text
    found = problems(tmp_path, text.replace(*change))
    assert any(p.startswith(expected) for p in found), found


def test_the_action_file_names_secrets_and_holds_no_value(tmp_path: Path) -> None:
    folder = tmp_path / "vault" / "sign-in"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(SIGN_IN)
    vault = load_vault(tmp_path / "vault")
    assert not vault.problems
    manifest = vault.skills["sign-in"].manifest
    # An input that reads like a secret reference stays that text: it is never parsed
    # again, so a caller cannot pull a secret into a field of its choosing.
    spec = host_spec(manifest, {"url": "http://h", "user": "${secrets.site_password}"},
                     Settings(_env_file=None))
    assert spec is not None
    assert spec["secrets"] == ["site_password", "report_key"]
    actions = spec["actions"]
    assert actions[1]["value"] == "${secrets.site_password}"  # the input's own text
    assert actions[2]["value"] == {"$secrets": [{"secret": "site_password"}]}
    assert actions[4]["url"] == {"$secrets": [
        "http://h/report?user=${secrets.site_password}&key=", {"secret": "report_key"}]}
    assert spelled(actions[4]["url"]) == \
        "http://h/report?user=${secrets.site_password}&key=${secrets.report_key}"

    values = {"site_password": "pw-1", "report_key": "key-2"}
    assert filled(actions[2], values)["value"] == "pw-1"
    assert filled(actions[4], values)["url"] == \
        "http://h/report?user=${secrets.site_password}&key=key-2"
    assert "pw-1" not in json.dumps(spec) and "key-2" not in json.dumps(spec)
    with pytest.raises(SecretRefError, match="secret 'report_key' did not reach"):
        filled(actions[4], {"site_password": "pw-1"})


def test_split_keeps_escapes_and_other_references_as_written() -> None:
    assert split_secrets("$${secrets.a} ${inputs.b}") == ["$${secrets.a} ${inputs.b}"]
    assert [str(p) for p in split_secrets("x${ secrets.a }y")] == ["x", "${secrets.a}", "y"]
    assert split_secrets("") == [""]
