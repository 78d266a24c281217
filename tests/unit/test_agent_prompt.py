"""What an agent step's model reads (shared/agent_prompt/prompt.py, companions.py): the system
prompt, the inputs message, the catalog, the ``skill`` tool's content, the tool-less
fallback. No model is involved: these are the strings it would be sent."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from shared.agent_prompt.companions import companions, skill_files
from shared.agent_prompt.prompt import (
    build_prompt,
    catalog,
    fallback_prompt,
    mentions,
    skill_content,
    user_message,
)
from shared.catalog import CatalogEntry, catalog_line, catalog_xml
from shared.skill import Skill, load_skill
from shared.vault import load_vault

EXAMPLES = Path(__file__).parents[2] / "examples"
BUDGETS = {"prompt_budget_chars": 60_000, "catalog_budget_chars": 15_000}

FRONT = """\
name: {name}
description: {description}
inputs:
  - name: text
    type: string
    required: true
    description: What to work on
  - name: limit
    type: integer
    default: 5
outputs:
  - name: answer
    type: string
    description: The result
approach: agent
"""


def write_skill(root: Path, name: str, body: str = "Do the work.\n", *,
                description: str = "Does one thing. Use it for tests.",
                files: dict[str, str | bytes] | None = None) -> Skill:
    folder = root / name
    folder.mkdir(parents=True)
    front = FRONT.format(name=name, description=description)
    (folder / "SKILL.md").write_text(f"---\n{front}---\n{body}", encoding="utf-8")
    for rel, content in (files or {}).items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    skill, problems = load_skill(folder)
    assert skill is not None, problems
    return skill


@pytest.fixture
def rich_skill(tmp_path: Path) -> Skill:
    secret = tmp_path / "outside.md"
    secret.write_text("OUTSIDE-SECRET", encoding="utf-8")
    skill = write_skill(tmp_path / "vault", "rich", "Read `schema.md` beside this file.\n",
                        files={
                            "schema.md": "SCHEMA-TEXT",
                            "data.json": '{"k": "DATA-JSON"}',
                            "references/guide.md": "GUIDE-TEXT",
                            "notes.txt": "NOTES-TEXT",
                            "scripts/run.py": "print('CODE-TEXT')",
                            "scripts/README.md": "SCRIPT-README",
                            "assets/logo.png": b"\x89PNG\r\n\x1a\n\0\0BINARY",
                            "assets/latin1.txt": "caf\xe9".encode("latin-1"),
                            "plan.md": "PLAN-TEXT",
                            "LICENSE.txt": "LICENSE-TEXT",
                            "benchmarks.json": '{"tests": [{"id": "t1", "name": "BENCH-CASE"}]}',
                            "sub-skills.json": '{"sub_skills": []}',
                            ".env": "HIDDEN-TEXT",
                            "__pycache__/x.cpython-311.pyc": b"\0CACHE",
                        })
    (skill.folder / "linked.md").symlink_to(secret)
    return skill


def test_text_companions_are_inlined_and_the_rest_listed(rich_skill: Skill) -> None:
    prompt = build_prompt(rich_skill, {"text": "x"}, [], **BUDGETS)
    system = prompt.system
    for text in ("SCHEMA-TEXT", "DATA-JSON", "GUIDE-TEXT", "NOTES-TEXT",
                 "Read `schema.md` beside this file."):
        assert text in system
    for text in ("CODE-TEXT", "SCRIPT-README", "BINARY", "PLAN-TEXT", "LICENSE-TEXT",
                 "BENCH-CASE", "HIDDEN-TEXT", "OUTSIDE-SECRET", "name: rich"):
        assert text not in system, text
    assert set(prompt.resources) == {"LICENSE.txt", "assets/latin1.txt", "assets/logo.png",
                                     "linked.md", "plan.md", "scripts/README.md",
                                     "scripts/run.py"}
    for rel in prompt.resources:
        assert f"<file>{rel}</file>" in system
    # Top level first, then deeper folders.
    assert system.index("NOTES-TEXT") < system.index("GUIDE-TEXT")
    assert prompt.warnings == () and prompt.catalog == ()


def test_skill_files_leave_out_the_manifest_records_and_caches(rich_skill: Skill) -> None:
    files = skill_files(rich_skill)
    assert not {"SKILL.md", "benchmarks.json", "sub-skills.json", ".env"} & set(files)
    assert not any("__pycache__" in f for f in files)


def test_the_prompt_budget_lists_what_does_not_fit(tmp_path: Path) -> None:
    skill = write_skill(tmp_path, "big", "Body.\n", files={
        "a.md": "A" * 500, "b.md": "B" * 5000, "c.md": "C" * 100})
    found = companions(skill, budget_chars=1000)
    assert [rel for rel, _ in found.inlined] == ["a.md", "c.md"]
    assert found.over_budget == ("b.md",) and "b.md" in found.resources
    prompt = build_prompt(skill, {"text": "x"}, [], prompt_budget_chars=1000,
                          catalog_budget_chars=1000)
    assert "B" * 100 not in prompt.system and "<file>b.md</file>" in prompt.system
    assert len(prompt.warnings) == 1
    assert "b.md" in prompt.warnings[0] and "SKILLQ_AGENT_PROMPT_BUDGET_CHARS" in prompt.warnings[0]
    # No budget at all: the body alone, every file listed.
    nothing = companions(skill, budget_chars=0)
    assert nothing.inlined == () and set(nothing.resources) == {"a.md", "b.md", "c.md"}


def test_the_inputs_are_the_declared_ones_as_json(tmp_path: Path) -> None:
    skill = write_skill(tmp_path, "probe")
    text = user_message(skill, {"text": "héllo", "undeclared": "PIPELINE-DATA"})
    assert "PIPELINE-DATA" not in text
    payload = json.loads(text[text.index("{"):])
    assert payload == {"text": "héllo", "limit": 5}  # the default applied, in order
    prompt = build_prompt(skill, {"text": "héllo"}, [], **BUDGETS)
    assert prompt.user == user_message(skill, {"text": "héllo"})
    assert "héllo" not in prompt.system  # inputs never leak into the system prompt


def test_a_skill_without_inputs_says_so(tmp_path: Path) -> None:
    folder = tmp_path / "plain"
    folder.mkdir()
    (folder / "SKILL.md").write_text("---\nname: plain\ndescription: A plain skill. Use it "
                                     "anywhere.\n---\nJust do it.\n", encoding="utf-8")
    skill, _ = load_skill(folder)
    assert skill is not None
    assert user_message(skill, {"x": 1}) == "This step has no inputs."
    assert "answer in plain text" in build_prompt(skill, {}, [], **BUDGETS).system


def test_the_header_names_the_skill_and_its_outputs(tmp_path: Path) -> None:
    system = build_prompt(write_skill(tmp_path, "probe"), {"text": "x"}, [], **BUDGETS).system
    assert system.startswith('You are running the skill "probe"')
    assert "answer (string)" in system
    assert '<skill_content name="probe">' in system and system.count("</skill_content>") == 1


def _xml_of(block: str) -> ET.Element:
    return ET.fromstring(block[block.index("<available_skills>"):])


def test_the_catalog_lists_skills_without_locations(tmp_path: Path) -> None:
    skills = [write_skill(tmp_path, n, description=f"Does {n} & more <stuff>.")
              for n in ("alpha", "beta")]
    listed = catalog(skills, 15_000)
    root = _xml_of(listed.block)
    assert [e.findtext("name") for e in root.findall("skill")] == ["alpha", "beta"]
    assert root.findall("skill")[0].findtext("description") == "Does alpha & more <stuff>."
    assert root.find("skill/location") is None  # skills arrive through the tool
    assert "`skill` tool" in listed.block and "`execute_skill`" in listed.block
    assert listed.names == ("alpha", "beta") and listed.warning is None


def test_no_skills_means_no_catalog_at_all(tmp_path: Path) -> None:
    prompt = build_prompt(write_skill(tmp_path, "probe"), {"text": "x"}, [], **BUDGETS)
    assert "<available_skills>" not in prompt.system and "execute_skill" not in prompt.system
    assert catalog([], 100).block == ""


def test_a_catalog_past_its_budget_is_cut_with_a_warning(tmp_path: Path) -> None:
    skills = [write_skill(tmp_path, f"skill-{i}", description="x" * 200) for i in range(10)]
    one_entry = len(catalog(skills[:1], 10_000).block.split("<available_skills>")[1])
    listed = catalog(skills, 3 * one_entry)
    assert 0 < len(listed.names) < 10
    assert listed.names == tuple(s.name for s in skills[:len(listed.names)])
    assert listed.warning is not None
    assert f"cut to {len(listed.names)} of 10" in listed.warning
    assert "SKILLQ_AGENT_CATALOG_BUDGET_CHARS" in listed.warning
    for skill in skills[len(listed.names):]:
        assert skill.name in listed.warning
    assert len(_xml_of(listed.block).findall("skill")) == len(listed.names)
    prompt = build_prompt(skills[0], {"text": "x"}, skills[1:], prompt_budget_chars=60_000,
                          catalog_budget_chars=3 * one_entry)
    assert any("catalog" in w for w in prompt.warnings)
    nothing = catalog(skills, 10)
    assert nothing.block == "" and nothing.names == () and nothing.warning is not None


def test_skill_content_wraps_the_body_and_lists_resources(rich_skill: Skill) -> None:
    content = skill_content(rich_skill)
    assert content.startswith('<skill_content name="rich">\nRead `schema.md`')
    assert content.endswith("</skill_content>")
    assert "name: rich" not in content  # frontmatter stripped: body only
    assert "SCHEMA-TEXT" not in content  # resources are listed, never read
    assert "<file>schema.md</file>" in content and "<file>scripts/run.py</file>" in content
    assert "<file>benchmarks.json</file>" not in content
    assert "- text (string, required): What to work on" in content
    assert "- limit (integer, default 5)" in content
    assert "- answer (string): The result" in content


def test_mentions_by_name_or_slash_slug() -> None:
    assert mentions("call the sub-skill `text-summarizer` with", "text-summarizer")
    assert mentions("Then /text-summarizer it.", "text-summarizer")
    assert mentions("/text-summarizer first", "text-summarizer")
    assert not mentions("see docs/text-summarizer for more", "text-summarizer")
    assert not mentions("text-summarizer-v2 is different", "text-summarizer")
    assert not mentions("nothing here", "text-summarizer")


def test_the_fallback_inlines_only_the_bodies_it_refers_to(tmp_path: Path) -> None:
    root = tmp_path / "vault"
    helper = write_skill(root, "helper", "HELPER-BODY\n")
    slugged = write_skill(root, "slugged", "SLUGGED-BODY\n")
    unused = write_skill(root, "unused", "UNUSED-BODY\n")
    main = write_skill(root, "main", "Use `helper` first, then /slugged.\n")
    prompt = fallback_prompt(main, {"text": "x"}, [helper, slugged, unused], **BUDGETS)
    assert "HELPER-BODY" in prompt.system and "SLUGGED-BODY" in prompt.system
    assert "UNUSED-BODY" not in prompt.system
    assert prompt.catalog == ("helper", "slugged", "unused")  # the catalog stays whole
    assert "cannot call tools" in prompt.system and "`skill` tool" not in prompt.system
    assert build_prompt(main, {"text": "x"}, [helper, slugged, unused], tool_calls=False,
                        **BUDGETS) == prompt
    tight = fallback_prompt(main, {"text": "x"}, [helper], prompt_budget_chars=10,
                            catalog_budget_chars=15_000)
    assert "HELPER-BODY" not in tight.system
    assert any("helper" in w and "did not fit" in w for w in tight.warnings)


def test_catalog_formatting_is_shared_with_the_cli() -> None:
    entry = CatalogEntry("a-skill", "Line one\n  line two.", "/v/a-skill/SKILL.md")
    assert catalog_line(entry) == "a-skill: Line one line two."
    root = ET.fromstring(catalog_xml([entry]))
    assert root.findtext("skill/location") == "/v/a-skill/SKILL.md"
    assert ET.fromstring(catalog_xml([])).tag == "available_skills"


# ------------------------------------------------------------------ the youtube example


@pytest.fixture(scope="module")
def youtube() -> dict[str, Skill]:
    vault = load_vault(EXAMPLES / "youtube")
    assert vault.valid, vault.problems
    return dict(vault.skills)


def test_content_analyzer_prompt(youtube: dict[str, Skill]) -> None:
    skill = youtube["content-analyzer"]
    prompt = build_prompt(skill, {"transcripts": [], "comments": [], "creator_metadata": []},
                          [youtube["text-summarizer"]], **BUDGETS)
    assert '<skill_file path="analyze-prompt.md">' in prompt.system  # its output schema
    assert "notable_quotes" in prompt.system
    assert prompt.resources == ("plan.md",) and prompt.catalog == ("text-summarizer",)
    assert "Build the video table" in prompt.system
    assert "youtube-creator-analytics" not in prompt.system
    assert json.loads(prompt.user[prompt.user.index("{"):]) == {
        "transcripts": [], "comments": [], "creator_metadata": []}
    assert prompt.warnings == ()


def test_blog_post_writer_prompt(youtube: dict[str, Skill]) -> None:
    skill = youtube["blog-post-writer"]
    prompt = build_prompt(skill, {"analysis": {"period": {}}}, [youtube["text-summarizer"]],
                          **BUDGETS)
    assert '<skill_file path="template.md">' in prompt.system
    payload = json.loads(prompt.user[prompt.user.index("{"):])
    assert payload == {"analysis": {"period": {}}, "tone": "professional", "thumbnails": [],
                       "output_dir": "./output", "target_words": 1200}
    assert re.search(r"answer with its outputs: blog_post \(string\); path \(string\)",
                     prompt.system)


def test_text_summarizer_prompt(youtube: dict[str, Skill]) -> None:
    prompt = build_prompt(youtube["text-summarizer"], {"text": "Long text."}, [], **BUDGETS)
    assert "<available_skills>" not in prompt.system and prompt.resources == ("plan.md",)
    assert "Count your words" in prompt.system
    assert json.loads(prompt.user[prompt.user.index("{"):]) == {
        "text": "Long text.", "max_words": 150, "focus": ""}
    # The fallback for a tool-less model: content-analyzer carries text-summarizer inline.
    fallback = fallback_prompt(youtube["content-analyzer"], {}, [youtube["text-summarizer"]],
                               **BUDGETS)
    assert '<skill_content name="text-summarizer">' in fallback.system
