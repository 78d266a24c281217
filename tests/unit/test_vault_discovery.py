"""Vault discovery: the flat layout, the short-lived cache, and lookup by name or /slug."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from shared.errors import SkillNotFound, VaultError
from shared.vault import forget_vaults, load_vault, open_vault

SKILL = """---
name: {name}
description: Summarise text. Use when a long text needs a short version.
---
# {name}
"""


def _write(vault: Path, name: str) -> None:
    (vault / name).mkdir(parents=True)
    (vault / name / "SKILL.md").write_text(SKILL.format(name=name), encoding="utf-8")


def test_open_vault_reuses_a_scan_within_its_ttl_and_rescans_after(tmp_path: Path) -> None:
    forget_vaults()
    _write(tmp_path, "first")
    assert set(open_vault(tmp_path, ttl_s=0.3).skills) == {"first"}
    _write(tmp_path, "second")
    assert set(open_vault(tmp_path, ttl_s=0.3).skills) == {"first"}  # cached
    time.sleep(0.35)
    assert set(open_vault(tmp_path, ttl_s=0.3).skills) == {"first", "second"}


def test_forget_vaults_drops_the_cache(tmp_path: Path) -> None:
    _write(tmp_path, "first")
    open_vault(tmp_path, ttl_s=60)
    _write(tmp_path, "second")
    forget_vaults()
    assert set(open_vault(tmp_path, ttl_s=60).skills) == {"first", "second"}


def test_hidden_and_cache_folders_are_not_skills(tmp_path: Path) -> None:
    _write(tmp_path, "real")
    (tmp_path / ".git").mkdir()
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "README.md").write_text("vault notes", encoding="utf-8")
    vault = load_vault(tmp_path)
    assert set(vault.skills) == {"real"}
    assert vault.valid


def test_get_accepts_a_slash_token_and_suggests_close_names(tmp_path: Path) -> None:
    _write(tmp_path, "daily-brief")
    vault = load_vault(tmp_path)
    assert vault.get("/daily-brief").name == "daily-brief"
    assert vault.get("daily-brief").manifest.display_label == "Daily Brief"
    with pytest.raises(SkillNotFound, match="did you mean 'daily-brief'"):
        vault.get("daily-breif")


def test_a_missing_vault_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(VaultError, match="does not exist; pass --vault PATH or set SKILLQ_VAULT"):
        load_vault(tmp_path / "nope")
