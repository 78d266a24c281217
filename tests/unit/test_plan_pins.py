"""A step's `skill: NAME@V` pin is frozen into the run's plan (shared/plan.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

from shared.plan import build_plan
from shared.vault import load_vault

VAULT = Path(__file__).parent.parent / "integration" / "vaults" / "publish"


def test_pinned_step_records_its_version_and_an_unpinned_one_the_vaults(
        tmp_path: Path) -> None:
    vault_dir = shutil.copytree(VAULT, tmp_path / "vault")
    skill_md = vault_dir / "greet" / "SKILL.md"
    skill_md.write_text(skill_md.read_text().replace("version: 1", "version: 4"))
    vault = load_vault(vault_dir)
    assert vault.valid, vault.problems
    plan = build_plan(vault.get("greet-both"), vault.skills, {"who": "ada"})
    steps = {s.id: (s.skill, s.version, s.pinned) for s in plan.steps}
    assert steps == {"pinned": ("greet", 1, True), "latest": ("greet", 4, False)}
