"""The slash-token grammar and display-name resolution, on seed 004's edge cases."""

from __future__ import annotations

import pytest

from shared.slash_tokens import Entry, TokenState, display_map, find_tokens, resolve

LIBRARY = {e.slug: e for e in (
    Entry("meeting-notes", "Meeting Notes", True, "Summarize the meeting."),
    Entry("daily-brief", "Daily Brief", True, "Write the daily brief."),
    Entry("daily", "Daily", True, "The short daily."),
    Entry("daily-brief-long", "Daily Brief Long", True, "The long brief."),
    Entry("old-report", "Old Report", False, "Retired."),
    Entry("twin-a", "Twin", True, "A."),
    Entry("twin-b", "Twin", True, "B."),
)}


def slugs(text: str) -> list[str]:
    return [t.slug for t in find_tokens(text, LIBRARY)]


@pytest.mark.parametrize("text", [
    "see docs/meeting-notes for it",           # a path
    "open example.com/meeting-notes now",      # a domain
    "https://example.com/meeting-notes",
    "end of sentence /meeting-notes.",         # punctuation ends nothing: no token
    "(/meeting-notes)",
    "/meeting-notes, then",
    "a/meeting-notes",
])
def test_nothing_is_injected_from_paths_urls_or_punctuation(text: str) -> None:
    assert slugs(text) == []
    assert resolve(text, LIBRARY).instructions == ()


def test_a_token_at_the_very_start_and_the_very_end() -> None:
    assert slugs("/meeting-notes") == ["meeting-notes"]
    assert slugs("/meeting-notes then /daily-brief") == ["meeting-notes", "daily-brief"]
    assert slugs("do it\t/daily-brief") == ["daily-brief"]
    assert slugs("line one\n/daily-brief\nline two") == ["daily-brief"]


def test_display_names_resolve_longest_first_and_are_normalized_to_slugs() -> None:
    done = resolve("please /Daily Brief Long today", LIBRARY)
    assert [t.slug for t in done.tokens] == ["daily-brief-long"]
    assert done.text == "please /daily-brief-long today"
    done = resolve("/Daily Brief and /daily brief", LIBRARY)  # case does not matter
    assert [t.slug for t in done.tokens] == ["daily-brief", "daily-brief"]
    assert done.text == "/daily-brief and /daily-brief"
    assert done.instructions == (("daily-brief", "Write the daily brief."),)  # once
    # "Daily" is also a slug: a display name never shadows a slug; "/Daily" means it.
    assert slugs("/daily") == ["daily"]
    assert slugs("/Daily Briefing") == ["daily"]  # no display name "Daily Briefing"
    assert resolve("/Daily Briefing", LIBRARY).text == "/daily Briefing"


def test_a_display_name_two_skills_claim_stays_plain_text() -> None:
    assert "twin" not in display_map(LIBRARY.values())
    done = resolve("ask /Twin about it", LIBRARY)
    assert done.instructions == () and done.text == "ask /Twin about it"
    assert [t.state for t in done.tokens] == [TokenState.UNKNOWN]  # /Twin is no slug


def test_disabled_and_unknown_tokens_say_how_to_fix_them() -> None:
    done = resolve("/old-report and /nothing-here and /meeting-notes", LIBRARY)
    assert [t.state for t in done.tokens] == [TokenState.DISABLED, TokenState.UNKNOWN,
                                              TokenState.ENABLED]
    assert done.instructions == (("meeting-notes", "Summarize the meeting."),)
    assert done.problems() == ["/old-report is disabled: `skillq enable old-report`",
                               "/nothing-here is no skill: `skillq new nothing-here`"]


def test_the_text_outside_tokens_is_kept_byte_for_byte() -> None:
    text = "  x /Meeting Notes\ty  /daily-brief\n"
    assert resolve(text, LIBRARY).text == "  x /meeting-notes\ty  /daily-brief\n"
