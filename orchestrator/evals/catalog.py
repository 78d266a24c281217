"""The catalog a trigger eval's router reads, what it loaded from it, and the draft an
improvement leaves.

Each description tried gets a folder of its own under ``<home>/evals/catalogs/``: one
minimal skill folder per skill of the vault a model may be offered (its name, its
description, its instructions), the skill under test with the description tried, and a
few decoys, skills nobody has that a request could be mistaken for. The built-in
``skillq-route`` runs with that folder as its vault (``catalog: all``), so its catalog is
exactly what a model would choose from. Copies, not links: nothing a run of the router
does can reach the vault (a script is not there to run, no benchmarks.json to rewrite).
What it loaded is read from its recorded turns (``loaded_skills``).

A better description is never written into the vault: it goes into a copy of the
skill's SKILL.md under ``<home>/evals/<name>/`` (``write_draft``), which a person reads,
and copies over the skill's SKILL.md to make the folder a draft (docs/publishing.md).
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import uuid
from collections.abc import Collection, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import select

from shared.agent_prompt.tools_spec import SKILL
from shared.atomic import write_text
from shared.db.agent_models import AgentTurn
from shared.db.session import transaction
from shared.skill import Skill, read_text, split_frontmatter
from shared.yamlload import load_mapping

# Skills a request could be mistaken for, none of which anyone has: each catalog lists
# those whose name no skill of the vault takes. Kept here rather than as a data file so
# an installed package has them without a package-data entry.
DECOYS: tuple[tuple[str, str], ...] = (
    ("calendar-scheduler", "Schedule, move or cancel meetings on a calendar and find a free "
     "slot for several people. Use when someone wants to book, reschedule or check "
     "availability."),
    ("email-drafter", "Draft an email or a reply in the person's voice from a few notes. "
     "Use when someone asks to write, answer or polish an email."),
    ("web-research", "Search the web and sum up what reliable sources say about a "
     "question, with links. Use for questions about current events, facts or products."),
    ("translate-text", "Translate text between languages, keeping its formatting. Use when "
     "someone asks to translate or to say something in another language."),
    ("code-review", "Review a code change (a diff or a pull request) for bugs, risky "
     "patterns and missing tests. Use when someone asks to review or check code."),
    ("expense-report", "Turn receipts and card statements into an expense report with "
     "categories and totals. Use when someone needs to file or total up expenses."),
)
_DESCRIPTION = re.compile(r"description\s*:")


def skill_md(name: str, description: str, body: str) -> str:
    """A minimal SKILL.md: the two Agent Skills fields and the instructions. The
    description is written as a JSON string, which YAML reads as the same text."""
    return (f"---\nname: {name}\ndescription: {json.dumps(description, ensure_ascii=False)}"
            f"\n---\n\n{body.strip()}\n")


def catalog_members(skills: Mapping[str, Skill], skill: Skill,
                    disabled: Collection[str]) -> dict[str, tuple[str, str]]:
    """name -> (description, body) of every skill the router is offered beside the one
    under test: the vault's that a model may be offered (not disabled in the library,
    not ``disable-model-invocation``), then the decoys whose names are free."""
    found = {n: (s.manifest.description, s.body) for n, s in sorted(skills.items())
             if n != skill.name and n not in disabled
             and not s.manifest.disable_model_invocation}
    for name, description in DECOYS:
        if name not in skills:
            found[name] = (description, f"{description}\n")
    return found


@contextlib.contextmanager
def catalog_folder(home: Path, skill: Skill, description: str,
                   others: Mapping[str, tuple[str, str]]) -> Iterator[Path]:
    """A vault folder holding ``others`` and ``skill`` with ``description``; removed when
    the block ends."""
    root = home / "evals" / "catalogs" / uuid.uuid4().hex[:12]
    root.mkdir(parents=True)
    try:
        for name, (text, body) in {**others, skill.name: (description, skill.body)}.items():
            (root / name).mkdir()
            (root / name / "SKILL.md").write_text(skill_md(name, text, body), encoding="utf-8")
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def with_description(text: str, description: str) -> str:
    """SKILL.md's ``text`` with its frontmatter's description replaced (however it was
    written: one line, quoted, or a block), every other line as it was."""
    lines = text.splitlines(keepends=True)
    close = next(i for i in range(1, len(lines)) if lines[i].rstrip() == "---")
    start = next((i for i in range(1, close) if _DESCRIPTION.match(lines[i])), None)
    end = close if start is None else next(
        (i for i in range(start + 1, close) if lines[i].strip() and not lines[i][0].isspace()),
        close)
    newline = "\r\n" if lines[0].endswith("\r\n") else "\n"
    line = f"description: {json.dumps(description, ensure_ascii=False)}{newline}"
    at = close if start is None else start
    edited = "".join([*lines[:at], line, *lines[end if start is not None else at:]])
    front, _, first = split_frontmatter(edited)
    read = load_mapping(front, first_line=first, raw_text_keys=frozenset({"description"}))
    if read.data.get("description") != description:  # a frontmatter this cannot edit
        raise ValueError(f"could not write the description into {text[:40]!r}")
    return edited


def write_draft(home: Path, skill: Skill, description: str) -> Path:
    """A copy of the skill's SKILL.md with ``description``, under ``<home>/evals/<name>/``
    (never the vault's folder, never a published version); its path."""
    edited = with_description(read_text(skill.skill_md), description)
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    path = home / "evals" / skill.name / f"SKILL-{stamp}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text(path, edited)
    return path


def loaded_skills(database_url: str, run_id: str) -> tuple[str, ...]:
    """The skills the run's model asked the ``skill`` tool for, in order, each once:
    the tool calls of its recorded turns (Pydantic AI ModelResponses as JSON)."""
    with transaction(database_url) as session:
        responses = session.scalars(select(AgentTurn.response).where(
            AgentTurn.run_id == run_id).order_by(AgentTurn.turn)).all()
    names: list[str] = []
    for response in responses:
        for part in (response or {}).get("parts") or []:
            if not (isinstance(part, dict) and part.get("part_kind") == "tool-call"
                    and part.get("tool_name") == SKILL):
                continue
            args = part.get("args")
            if isinstance(args, str):  # a provider may hand them over as JSON text
                try:
                    args = json.loads(args)
                except ValueError:
                    args = {}
            name = str((args if isinstance(args, dict) else {}).get("name", ""))
            name = name.strip().removeprefix("/")
            if name and name not in names:
                names.append(name)
    return tuple(names)
