"""What `skillq ask`'s model reads (shared/agent_prompt/ask.py): the built-in skill's
instructions, the library's enabled skills as a catalog, the invoked skills' bodies, the
tool-less fallback; the stream's wire format; the built-in skill's reserved name."""

from __future__ import annotations

from pathlib import Path

from test_agent_prompt import write_skill

from shared import ask_stream
from shared.agent_prompt.ask import ask_prompt, estimate_tokens
from shared.builtin import ASK, builtin_skill
from shared.library_tokens import LibraryState, token_entries
from shared.skill import Skill
from shared.vault import load_vault

BUDGETS = {"prompt_budget_chars": 60_000, "catalog_budget_chars": 15_000}


def library(tmp_path: Path) -> dict[str, Skill]:
    return {s.name: s for s in (
        write_skill(tmp_path, "daily-brief", "Brief the day: calendar first.\n"),
        write_skill(tmp_path, "inbox-zero", "Archive what is answered.\n"),
        write_skill(tmp_path, "old-report", "Never sent: disabled.\n"))}


def prompt(tmp_path: Path, text: str, *, tool_calls: bool = True,
           states: dict[str, LibraryState] | None = None, **budgets: int):
    skills = library(tmp_path)
    entries = token_entries(skills, states or {"old-report": LibraryState(enabled=False)})
    ask = builtin_skill(ASK)
    assert ask is not None
    return ask_prompt(ask, text, skills, entries, tool_calls=tool_calls,
                      **{**BUDGETS, **budgets})


def test_the_catalog_lists_enabled_skills_and_bodies_come_only_when_invoked(
        tmp_path: Path) -> None:
    shown = prompt(tmp_path, "what is on today?")
    system = shown.prompt.system
    assert shown.prompt.catalog == ("daily-brief", "inbox-zero")  # old-report disabled
    assert "<name>old-report</name>" not in system
    assert "Brief the day" not in system and "Archive what" not in system
    assert shown.prompt.user == "what is on today?"
    assert [t.name for t in shown.tools] == ["skill", "execute_skill",
                                             "skill_improvement_note"]


def test_an_invoked_skill_brings_its_instructions_and_its_display_name_becomes_its_slug(
        tmp_path: Path) -> None:
    shown = prompt(tmp_path, "/Daily Brief then /daily-brief and /old-report please")
    system = shown.prompt.system
    assert system.count("Brief the day: calendar first.") == 1  # once, named twice
    assert "The person invoked /daily-brief: follow its instructions" in system
    assert "Never sent" not in system  # disabled: reported, never sent
    assert shown.prompt.user == "/daily-brief then /daily-brief and /old-report please"
    assert shown.resolution.problems() == [
        "/old-report is disabled: `skillq enable old-report`"]


def test_a_library_label_is_a_display_name_too(tmp_path: Path) -> None:
    shown = prompt(tmp_path, "/Morning Mail now",
                   states={"inbox-zero": LibraryState(label="Morning Mail")})
    assert shown.prompt.user == "/inbox-zero now"
    assert "Archive what is answered." in shown.prompt.system


def test_a_model_without_tools_gets_the_bodies_inline_and_no_tools(tmp_path: Path) -> None:
    shown = prompt(tmp_path, "anything", tool_calls=False)
    system = shown.prompt.system
    assert "Brief the day" in system and "Archive what" in system
    assert "cannot call tools" in system
    assert "Never sent" not in system
    assert shown.tools == ()


def test_bodies_past_the_prompt_budget_are_left_out_with_a_warning(tmp_path: Path) -> None:
    ask = builtin_skill(ASK)
    assert ask is not None
    shown = prompt(tmp_path, "/daily-brief", prompt_budget_chars=len(ask.body) + 10)
    assert "Brief the day" not in shown.prompt.system
    assert any("daily-brief did not fit" in w for w in shown.prompt.warnings)


def test_the_estimate_counts_system_user_and_tools(tmp_path: Path) -> None:
    shown = prompt(tmp_path, "x" * 400)
    assert shown.estimate_tokens > estimate_tokens(shown.prompt.system) + 100
    assert estimate_tokens("abcd" * 10) == 10


def test_stream_pieces_fit_notify_and_decode_back() -> None:
    text = ("é\u0001" * (ask_stream.MAX_PIECE_CHARS + 3))[:ask_stream.MAX_PIECE_CHARS * 2 + 5]
    payloads = list(ask_stream.encode("run-1", 7, text))
    assert len(payloads) == 3
    assert all(len(p.encode()) < 8000 for p in payloads)
    pieces = [ask_stream.decode(p) for p in payloads]
    assert [p.seq for p in pieces if p] == [7, 8, 9]
    assert "".join(p.text for p in pieces if p) == text
    assert ask_stream.decode("not json") is None
    assert ask_stream.decode('{"run": "r"}') is None


def test_a_vault_skill_may_not_take_the_built_in_name(tmp_path: Path) -> None:
    write_skill(tmp_path, ASK)
    problems = [str(p) for p in load_vault(tmp_path).problems]
    assert any(f"'{ASK}' is the name of a skill skillq ships" in p for p in problems), problems
