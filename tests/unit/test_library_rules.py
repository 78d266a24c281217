"""The skill library's pure rules: which skills refer to a skill (the `/name` versus
`/name-longer` rule), display labels, and the pin order with its cap of 10."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.library.dependents import find_dependents, grouped, mentions
from orchestrator.library.display import checked_label, display_label, title_case
from orchestrator.library.repo import pin_order
from shared.db.library_models import MAX_PINS
from shared.errors import LibraryError
from shared.vault import load_vault


@pytest.mark.parametrize("text", [
    "/fetch", "Run /fetch first.", "then /fetch, then /parse", "(/fetch)", "`/fetch`",
    "use\n/fetch\n", "/fetch.", "/fetch@2 pinned", "call /fetch!",
])
def test_a_slash_token_mentions_the_skill(text: str) -> None:
    assert mentions(text, "fetch")


@pytest.mark.parametrize("text", [
    "/fetch-longer", "/fetches", "/fetch_all", "/fetchX", "docs/fetch", "https://example.com/fetch",
    "a/fetch", "~/fetch", "fetch", "//fetch-page", "../fetch", "see:/fetch",
])
def test_a_longer_token_or_a_path_does_not(text: str) -> None:
    assert not mentions(text, "fetch")


def test_a_name_with_regex_characters_is_matched_literally() -> None:
    assert mentions("use /a-b now", "a-b") and not mentions("use /axb now", "a.b")


def write(vault: Path, name: str, front: str, body: str = "Do it.\n",
          sub_skills: list[str] | None = None) -> None:
    folder = vault / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(f"---\nname: {name}\n{front}---\n\n{body}",
                                     encoding="utf-8")
    if sub_skills is not None:
        entries = ", ".join(f'{{"skill_id": "{s}"}}' for s in sub_skills)
        (folder / "sub-skills.json").write_text(f'{{"sub_skills": [{entries}]}}')


LEAF = ("description: A leaf. Use it in tests.\napproach: code\nrun:\n  command: python3 x.py\n")


def test_dependents_are_steps_sub_skills_and_mentions(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    write(vault, "fetch", LEAF)
    write(vault, "fetch-longer", LEAF)
    write(vault, "pipe", "description: A pipeline. Use it in tests.\nsteps:\n"
          "  - id: get\n    skill: fetch@1\n  - id: other\n    skill: fetch-longer\n",
          sub_skills=["fetch", "fetch-longer"])
    write(vault, "guide", "description: Advice. Use it when writing.\n",
          body="First load /fetch, then read.\n")
    write(vault, "near-miss", "description: Says /fetch-longer only. Use it never.\n",
          body="Try /fetch-longer or docs/fetch; never the other.\n")
    write(vault, "described", "description: Wraps /fetch. Use it in tests.\n")
    loaded = load_vault(vault)
    refs = find_dependents(loaded, "fetch")
    assert [(r.skill, r.how) for r in refs] == [
        ("described", "mentions /fetch in its description"),
        ("guide", "mentions /fetch in its instructions"),
        ("pipe", "step 'get'"),
        ("pipe", "sub-skills.json"),
    ]
    assert grouped(refs) == ["described (mentions /fetch in its description)",
                             "guide (mentions /fetch in its instructions)",
                             "pipe (step 'get', sub-skills.json)"]
    assert {r.skill for r in find_dependents(loaded, "fetch-longer")} == {"near-miss", "pipe"}
    assert find_dependents(loaded, "guide") == []


def test_a_skill_does_not_depend_on_itself(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    write(vault, "solo", "description: Mentions /solo itself. Use it alone.\n", body="/solo\n")
    assert find_dependents(load_vault(vault), "solo") == []


def test_display_label_falls_back_to_the_title_cased_slug() -> None:
    assert title_case("daily-brief") == "Daily Brief"
    assert display_label("daily-brief", None, None) == "Daily Brief"
    assert display_label("daily-brief", None, "Morning Brief") == "Morning Brief"
    assert display_label("daily-brief", "My Brief", "Morning Brief") == "My Brief"


def test_labels_are_one_line_and_bounded() -> None:
    assert checked_label("  Daily \n  Brief ") == "Daily Brief"
    with pytest.raises(LibraryError, match="--clear"):
        checked_label("   ")
    with pytest.raises(LibraryError, match="at most 120"):
        checked_label("x" * 121)


def test_pins_keep_their_order_and_move() -> None:
    assert pin_order([], "a") == ["a"]
    assert pin_order(["a", "b"], "c") == ["a", "b", "c"]
    assert pin_order(["a", "b"], "c", 0) == ["c", "a", "b"]
    assert pin_order(["a", "b", "c"], "c", 0) == ["c", "a", "b"]  # pinned again: moved
    assert pin_order(["a", "b", "c"], "a", 99) == ["b", "c", "a"]  # past the end: last


def test_at_most_ten_pins() -> None:
    full = [f"s{i}" for i in range(MAX_PINS)]
    assert MAX_PINS == 10
    with pytest.raises(LibraryError, match=r"at most 10 .* s0, s1, .* s9; unpin one first"):
        pin_order(full, "eleventh")
    assert pin_order(full, "s3", 0)[0] == "s3"  # moving a pinned one is fine when full


def test_deleted_imported_and_replaced_folders_are_not_in_the_vault(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    write(vault, "kept", LEAF)
    for hidden in (".deleted/kept-20260101T000000Z", ".replaced/kept-20260101T000000Z",
                   ".importing-x/skillq-archive/vault/kept"):
        (vault / hidden).mkdir(parents=True)
        (vault / hidden / "SKILL.md").write_text("---\nname: kept\ndescription: Old.\n---\n")
    loaded = load_vault(vault)
    assert list(loaded.skills) == ["kept"]
    assert [p.name for p in loaded.folders] == ["kept"]  # nor reported as broken
