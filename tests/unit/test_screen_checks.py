"""Validation of browser (dom0) and desktop (cmd0) skills, and the display check."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.vault import load_vault
from workers.cmd0.display import display_problem

HEAD = """name: {name}
description: A screen skill. Use it in tests.
inputs:
  - name: url
    type: string
    required: true
"""
FORM = """approach: dom0
outputs:
  - name: greeting
    type: string
browser:
  actions:
    - goto: ${inputs.url}
    - fill:
        selector: "#name"
        value: ${inputs.url}
    - click: "button[type=submit]"
    - extract:
        selector: "#result"
        output: greeting
"""


def problems(tmp_path: Path, body: str, name: str = "screen", files: tuple[str, ...] = ()
             ) -> list[str]:
    folder = tmp_path / "vault" / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(f"---\n{HEAD.format(name=name)}{body}---\n\nBody.\n")
    for file in files:
        (folder / file).write_bytes(b"\x89PNG\r\n\x1a\n")
    return [f"{p.field}: {p.message}" for p in load_vault(tmp_path / "vault").problems]


def test_a_browser_action_skill_is_valid(tmp_path: Path) -> None:
    assert problems(tmp_path, FORM) == []


@pytest.mark.parametrize(("change", "expected"), [
    (("approach: dom0", "approach: code"),
     "approach: browser actions run on the dom0 queue; set approach: dom0"),
    (("output: greeting", "output: greting"),
     "browser.actions[3].extract.output: 'greting' is not an output of this skill"),
    (("${inputs.url}\n    - fill", "${inputs.link}\n    - fill"),
     "browser.actions[0].goto.url: ${inputs.link}: this skill has no input 'link'"),
    (("    - click:", "    - clik:"), "browser.actions[2].clik: unknown field; did you mean "
     "'click'?"),
    (("type: string\nbrowser", "type: integer\nbrowser"),
     "extract produces string, but output 'greeting' is declared integer"),
    (('    - click: "button[type=submit]"\n',
      '    - click: "button"\n      goto: ${inputs.url}\n'),
     "browser.actions[2]: an action is one of goto, click"),
])
def test_browser_problems_name_the_field(tmp_path: Path, change: tuple[str, str],
                                         expected: str) -> None:
    found = problems(tmp_path, FORM.replace(*change))
    assert any(expected in p for p in found), found


def test_a_dom0_skill_needs_actions_a_script_or_run(tmp_path: Path) -> None:
    found = problems(tmp_path, "approach: dom0\nbrowser:\n  timeout: 5\n")
    assert any(p.startswith("browser: give either actions") for p in found), found
    found = problems(tmp_path / "2", "approach: dom0\nbrowser:\n  script: flow.py\n")
    assert any("browser.script: 'flow.py' does not exist" in p for p in found), found


def test_desktop_targets_and_templates(tmp_path: Path) -> None:
    body = """approach: cmd0
desktop:
  actions:
    - click: ok.png
    - type: ${inputs.url}
    - hotkey: ctrl+s
    - double_click: ../outside.png
    - wait_for: gone.png
"""
    found = problems(tmp_path, body, files=("ok.png",))
    assert [p.split(":")[0] for p in found] == ["desktop.actions[3].double_click.image",
                                                "desktop.actions[4].wait_for.image"], found
    assert "'../outside.png' is outside the skill folder" in found[0]
    assert "'gone.png' does not exist" in found[1]
    found = problems(tmp_path / "2", body.replace("- click: ok.png", "- click:\n        x: 10"))
    assert "desktop.actions[0].click: give either image (a template file in the skill " \
        "folder) or both x and y (screen coordinates)" in found, found


def test_a_missing_display_is_named() -> None:
    assert "DISPLAY is not set" in (display_problem({}) or "")
    assert "cannot connect to the X display ':4242'" in (
        display_problem({"DISPLAY": ":4242"}) or "")
