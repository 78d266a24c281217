"""Agent Skills mode: the verdict of the reference validator, with messages that say the fix.

A folder passes here exactly when `agentskills validate` (PyPI skills-ref 0.1.1) exits 0 for
it, quirks included: the parity test in tests/unit/test_agentskills_parity.py holds us to
that over tests/corpus/agentskills/. The rules are copied, the wording is ours. skills_ref
is only a dev dependency, so it is never imported here.

Also here, as Agent Skills knowledge both validators and the exporter share: the fix for
keys other clients put in the frontmatter (`unknown_field_hint`), and `spec_frontmatter`,
which writes the spec fields so that the reference and skillq read back the same values.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from shared.problems import Problem, did_you_mean

SPEC_FIELDS: frozenset[str] = frozenset(
    {"name", "description", "license", "compatibility", "metadata", "allowed-tools"}
)
# Keys real skills carry beside the spec's six: Claude Code's own frontmatter fields, and
# facts about the skill that the spec keeps under metadata. Neither is a typo of a skillq
# field ('author' is not 'auth'), so each gets its own fix instead of a did-you-mean.
# Claude Code's are those its skills reference documents (code.claude.com/docs/en/skills,
# late 2026) besides the spec's and `model`, which is skillq's too. skillq honours
# disable-model-invocation and keeps the others as written, unused (shared/kept_fields.py).
CLAUDE_CODE_FIELDS: frozenset[str] = frozenset(
    {"when_to_use", "argument-hint", "arguments", "disable-model-invocation", "user-invocable",
     "effort", "context", "agent", "hooks", "paths", "shell"}
)
DISABLE_MODEL_INVOCATION = "disable-model-invocation"
METADATA_KEYS: frozenset[str] = frozenset(
    {"author", "authors", "maintainer", "owner", "tags", "keywords", "category", "homepage",
     "repository", "source", "created", "updated", "changelog", "triggers"}
)
MAX_NAME_LENGTH = 64
MAX_DESCRIPTION_LENGTH = 1024
MAX_COMPATIBILITY_LENGTH = 500

# strictyaml's bundled ruamel Reader refuses these characters, but strictyaml then dies with
# an AttributeError instead of a YAMLError; finding them first gives the user a line number.
_NON_PRINTABLE = re.compile(
    "[^\x09\x0a\x0d\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]"
)

_YAML_FIXES = {
    "DuplicateKeysDisallowed": "keep only one of the repeated keys",
    "FlowMappingDisallowed": (
        "write lists and maps in block style, one item per line, or quote the whole value"
    ),
    "TagTokenDisallowed": "remove the '!' tag (every value is read as text) or quote the value",
    "AnchorTokenDisallowed": "write the value out instead of using &anchor/*alias, or quote it",
}
_YAML_FIX_DEFAULT = (
    "indent with spaces (never tabs) and quote values that contain ': ', ' #', tabs, "
    "or start with a YAML symbol"
)


def _kind(value: object) -> str:
    """What is wrong with a value that should have been non-empty text."""
    if isinstance(value, list):
        return "must be a single text value, not a list"
    if isinstance(value, dict):
        return "must be a single text value, not a mapping"
    if value is None or isinstance(value, str):
        return "is empty"
    # strictyaml only yields text, lists and maps; the main validator's YAML loader types more.
    return f"must be text, not {type(value).__name__} {value!r} (quote it in YAML)"


def suggest_name(text: str | None) -> str:
    """A valid skill name close to `text`, offered in fix hints."""
    slug = unicodedata.normalize("NFKC", text or "").strip().lower()
    slug = "".join(c if c.isalnum() or c == "-" else "-" for c in slug)
    slug = re.sub("-{2,}", "-", slug).strip("-")[:MAX_NAME_LENGTH].strip("-")
    return slug or "my-skill"


def name_problems(name: object, folder_name: str | None) -> list[str]:
    """The reference's name rules; `folder_name` None skips the folder comparison."""
    if not isinstance(name, str) or not name.strip():
        example = suggest_name(folder_name)
        return [f"name {_kind(name)}; set it to the folder's name, e.g. name: {example}"]
    # The reference checks the stripped NFKC form, so 'ﬁle' passes as 'file'.
    name = unicodedata.normalize("NFKC", name.strip())
    fix = f"rename it to '{suggest_name(name)}' and rename the folder to match"
    problems = []
    if len(name) > MAX_NAME_LENGTH:
        problems.append(
            f"name '{name}' is {len(name)} characters, over the limit of {MAX_NAME_LENGTH}; "
            f"shorten it, e.g. {fix}"
        )
    if name != name.lower():
        problems.append(f"name '{name}' must be lowercase; {fix}")
    if name.startswith("-") or name.endswith("-"):
        problems.append(f"name '{name}' must not start or end with a hyphen; {fix}")
    if "--" in name:
        problems.append(f"name '{name}' must not contain consecutive hyphens; {fix}")
    bad = "".join(sorted({c for c in name if not (c.isalnum() or c == "-")}))
    if bad:
        problems.append(
            f"name '{name}' contains {bad!r}: only letters, digits and hyphens are allowed; {fix}"
        )
    if folder_name is not None and unicodedata.normalize("NFKC", folder_name) != name:
        if folder_name in ("", ".", ".."):
            # The reference compares with the path as typed, and '.' has no name.
            problems.append(
                f"name '{name}' must equal the folder's name, but the folder was given as a "
                f"path without one; validate it as ../{name} instead of '.'"
            )
        else:
            # Offer renaming the folder only when the name itself is a valid one.
            rename = f"rename the folder to '{name}' or " if not problems else ""
            problems.append(
                f"name '{name}' does not match its folder '{folder_name}'; "
                f"{rename}set name: {suggest_name(folder_name)}"
            )
    return problems


def description_problems(description: object) -> list[str]:
    if not isinstance(description, str) or not description.strip():
        return [
            f"description {_kind(description)}; write one or two sentences saying what the "
            "skill does and when to use it"
        ]
    if len(description) > MAX_DESCRIPTION_LENGTH:
        over = len(description) - MAX_DESCRIPTION_LENGTH
        return [
            f"description is {len(description)} characters, over the limit of "
            f"{MAX_DESCRIPTION_LENGTH}; shorten it by at least {over} and move the detail "
            "into the body of SKILL.md"
        ]
    return []


def compatibility_problems(value: object) -> list[str]:
    # The reference accepts an empty string here, though the spec says 1-500 characters.
    if not isinstance(value, str):
        return [
            f"compatibility {_kind(value)}; write the requirements as one line of text, "
            "e.g. compatibility: Requires Python 3.11+ and network access"
        ]
    if len(value) > MAX_COMPATIBILITY_LENGTH:
        over = len(value) - MAX_COMPATIBILITY_LENGTH
        return [
            f"compatibility is {len(value)} characters, over the limit of "
            f"{MAX_COMPATIBILITY_LENGTH}; shorten it by at least {over}"
        ]
    return []


def find_skill_md(folder: Path) -> Path | None:
    # exists(), not is_file(), as the reference: a directory named SKILL.md is found, then
    # fails to read.
    for name in ("SKILL.md", "skill.md"):
        if (folder / name).exists():
            return folder / name
    return None


def _read(skill_md: Path) -> str | Problem:
    path = str(skill_md)
    try:
        raw = skill_md.read_bytes()
    except OSError as error:
        reason = error.strerror or str(error)
        return Problem(path, "file", f"file cannot be read ({reason}); make it a readable file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        return Problem(
            path,
            "file",
            f"file is not valid UTF-8 (byte 0x{raw[error.start]:02x} at offset {error.start}); "
            "re-save SKILL.md as UTF-8",
            raw.count(b"\n", 0, error.start) + 1,
        )
    # The reference reads with Path.read_text, whose universal newlines turn CRLF and CR into LF.
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _no_opening_message(content: str) -> str:
    if content.startswith("\ufeff"):
        return (
            "frontmatter must open with '---' as the very first characters, but the file "
            "starts with a byte-order mark; re-save SKILL.md as UTF-8 without BOM"
        )
    if content.lstrip().startswith("---"):
        return (
            "frontmatter must open with '---' as the very first characters; delete the blank "
            "lines or spaces before it"
        )
    return (
        "frontmatter is missing; start SKILL.md with a '---' line, then name: and "
        "description:, then a closing '---' line"
    )


def _yaml_problem(path: str, error: Exception, note: str) -> Problem:
    line = None
    for attribute in ("problem_mark", "context_mark"):
        mark_line = getattr(getattr(error, attribute, None), "line", None)
        if isinstance(mark_line, int):
            # Frontmatter text starts on the '---' line, so its 0-based lines are file lines - 1.
            line = mark_line + 1
            break
    what = ": ".join(
        str(part)
        for part in (getattr(error, "context", None), getattr(error, "problem", None))
        if part
    ) or str(error)
    fix = _YAML_FIXES.get(type(error).__name__, _YAML_FIX_DEFAULT)
    message = f"frontmatter is not valid YAML ({what}); {fix}{note}"
    return Problem(path, "frontmatter", message, line)


def _frontmatter(path: str, content: str) -> tuple[dict[str, object], str, str] | Problem:
    """Parse as the reference does: (fields, frontmatter text, note on delimiter quirks)."""
    if not content.startswith("---"):
        return Problem(path, "frontmatter", _no_opening_message(content), 1)
    # The reference splits on the first two '---' anywhere, even inside a value or a line.
    parts = content.split("---", 2)
    if len(parts) < 3:
        return Problem(
            path, "frontmatter", "frontmatter is not closed; add a '---' line after the fields", 1
        )
    text = parts[1]
    # Notes for the two delimiter quirks, added to problems they may have caused.
    note = ""
    if not content.startswith("---\n"):
        note += " (note: the first line should be exactly '---')"
    if not text.endswith("\n"):
        line = text.count("\n") + 1
        note += (
            f" (note: the frontmatter ends at the first '---' in the file, inside line {line}; "
            "reword that line so it holds no '---')"
        )
    bad = _NON_PRINTABLE.search(text)
    if bad:
        return Problem(
            path,
            "frontmatter",
            f"frontmatter contains the control character U+{ord(bad.group()):04X}, which YAML "
            "does not allow; delete it",
            text.count("\n", 0, bad.start()) + 1,
        )
    # Imported here: every skill load uses this module, only `--spec agentskills` this parser.
    import strictyaml

    try:
        data: object = strictyaml.load(text).data
    except strictyaml.YAMLError as error:
        return _yaml_problem(path, error, note)
    except RecursionError:
        return Problem(path, "frontmatter", "frontmatter is nested too deeply to read; flatten it")
    except Exception as error:
        # strictyaml 1.7 fails with AssertionError or TypeError on complex keys ('? - a');
        # the reference crashes there, a non-zero exit, so this is a problem, not a bug.
        return Problem(
            path,
            "frontmatter",
            f"frontmatter could not be read ({type(error).__name__}: {error}); write plain "
            "'key: value' lines (complex '?' keys are not supported)",
        )
    if not isinstance(data, dict):
        shape = "a YAML list" if isinstance(data, list) else "empty or plain text"
        return Problem(
            path,
            "frontmatter",
            f"frontmatter is {shape}, not 'key: value' fields; write name: and description: "
            f"lines between the two '---' lines{note}",
            1,
        )
    fields = {str(key): value for key, value in data.items()}
    metadata = fields.get("metadata")
    if isinstance(metadata, dict):
        fields["metadata"] = {str(k): str(v) for k, v in metadata.items()}
    return fields, text, note


def _key_line(text: str, key: str) -> int | None:
    """The file line of a top-level key, best effort (strictyaml drops leading blank lines)."""
    pattern = re.compile(rf"""['"]?{re.escape(key)}['"]?[ \t]*:""")
    for number, line in enumerate(text.split("\n"), start=1):
        if pattern.match(line):
            return number
    return None


def foreign_field_hint(key: str) -> str | None:
    """The fix for a key another client or custom puts at the top of the frontmatter."""
    if key in CLAUDE_CODE_FIELDS:
        unused = "" if key == DISABLE_MODEL_INVOCATION else ", and skillq does not read it"
        return (f"remove it: '{key}' is a Claude Code field, outside the Agent Skills "
                f"specification{unused}")
    if key in METADATA_KEYS:
        return (f"remove it, or move it under metadata: (a '{key}: ...' line indented below "
                "a 'metadata:' line), where any key is kept as written")
    return None


def unknown_field_hint(key: str, known: Iterable[str]) -> str:
    """What to do about a top-level frontmatter key that is not one of ``known``."""
    known = sorted(set(known))
    foreign = foreign_field_hint(key)
    if foreign is not None:
        return foreign
    close = did_you_mean(key, known)
    return f"did you mean '{close}'?" if close else f"remove it (known fields: {', '.join(known)})"


def _unknown_field_message(key: str) -> str:
    allowed = ", ".join(sorted(SPEC_FIELDS))
    if not key.strip():
        return f"frontmatter has a field without a name; remove it (allowed fields: {allowed})"
    close = did_you_mean(key, SPEC_FIELDS)
    fix = foreign_field_hint(key) or (
        f"did you mean '{close}'?"
        if close
        else "remove it; skillq execution fields belong in skill.yaml beside SKILL.md"
    )
    return f"unknown field '{key}': Agent Skills allows only {allowed}; {fix}"


def validate_agentskills(folder: Path) -> list[Problem]:
    """Every problem in a skill folder; [] exactly when `agentskills validate` exits 0."""
    if not folder.is_dir():
        what = "is not a folder" if folder.exists() else "does not exist"
        return [
            Problem(str(folder), "file", f"skill folder {what}; pass a folder with a SKILL.md file")
        ]
    skill_md = find_skill_md(folder)
    if skill_md is None:
        return [
            Problem(
                str(folder),
                "file",
                "no SKILL.md file in this folder; create one that starts with '---', "
                "name: and description:, and a closing '---'",
            )
        ]
    path = str(skill_md)
    content = _read(skill_md)
    if isinstance(content, Problem):
        return [content]
    parsed = _frontmatter(path, content)
    if isinstance(parsed, Problem):
        return [parsed]
    fields, text, note = parsed

    problems = [
        Problem(
            path,
            key if key.strip() else "frontmatter",
            _unknown_field_message(key),
            _key_line(text, key),
        )
        for key in fields
        if key not in SPEC_FIELDS
    ]
    rules: dict[str, Callable[[object], list[str]]] = {
        "name": lambda value: name_problems(value, folder.name),
        "description": description_problems,
        "compatibility": compatibility_problems,
    }
    for field, rule in rules.items():
        if field in fields:
            messages = rule(fields[field])
        elif field == "compatibility":
            continue
        else:
            example = suggest_name(folder.name) if field == "name" else "<what it does, when>"
            messages = [f"{field} is missing; add '{field}: {example}' to the frontmatter"]
            messages[0] += note
        problems.extend(Problem(path, field, m, _key_line(text, field)) for m in messages)
    return problems


def _spec_scalar(text: str) -> str:
    # JSON strings are valid YAML double-quoted scalars. The reference validator splits
    # SKILL.md on the first two '---' anywhere, so a '---' inside a value is escaped.
    quoted = json.dumps(text, ensure_ascii=False)
    return quoted.replace("-", "\\x2d") if "---" in text else quoted


def _spec_block(value: object, indent: int) -> list[str]:
    """The lines of a list or mapping value, in block style: the reference's strictyaml
    refuses flow style ('[a, b]'), which also leaves an empty list no way to be written,
    so empty lists and mappings are left out."""
    pad = " " * indent
    lines: list[str] = []
    pairs: Iterable[tuple[str | None, Any]] = (
        ((str(k), v) for k, v in value.items()) if isinstance(value, Mapping)
        else ((None, v) for v in value) if isinstance(value, list | tuple) else ())
    for key, item in pairs:
        head = f"{pad}- " if key is None else f"{pad}{_spec_scalar(key)}: "
        if isinstance(item, Mapping | list | tuple):
            if item:
                lines += [head.rstrip(), *_spec_block(item, indent + 2)]
        else:
            lines.append(head + ("" if item is None else _spec_scalar(str(item))))
    return [line.rstrip() for line in lines]


def spec_frontmatter(fields: Mapping[str, Any]) -> str:
    """The spec fields of ``fields`` as SKILL.md frontmatter (without the '---' lines) that
    the reference validator and skillq both read back as the same values: text quoted,
    `allowed-tools` and metadata lists and mappings in block style, as written."""
    lines = []
    for key in ("name", "description", "license", "compatibility", "allowed-tools",
                "metadata"):
        value = fields.get(key)
        if isinstance(value, Mapping | list | tuple):
            if value:
                lines += [f"{key}:", *_spec_block(value, 2)]
        elif value is not None:
            lines.append(f"{key}: {_spec_scalar(str(value))}")
    return "\n".join(lines) + "\n"
