"""YAML for skill files: one mapping, YAML 1.2 core typing, no duplicate keys, lines kept.

PyYAML resolves scalars by YAML 1.1 (``no`` is false, ``2024-01-01`` a date, ``0o7``
and ``1:30`` numbers), which silently changes what users wrote. Skill files are read
with the YAML 1.2 core schema instead: only true/false are booleans, only null/~/empty
is null, only plain decimal digits are numbers; everything else stays the text written.

What one file may cost to read is bounded, so a hostile or broken skill cannot stall every
command that scans its vault: anchors and aliases are refused (a few lines of nested
aliases expand to billions of nodes), and so are documents over MAX_YAML_BYTES or nested
deeper than MAX_YAML_DEPTH. Each is a YamlProblem, which the vault reports against that
one skill while it loads the others.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import yaml

Loc = tuple[str | int, ...]

_INT = re.compile(r"[-+]?[0-9]+\Z")
_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?\Z")
_INF = re.compile(r"[-+]?\.(inf|Inf|INF)\Z")
_NAN = re.compile(r"\.(nan|NaN|NAN)\Z")
_STD_TAG = "tag:yaml.org,2002:"
_PLAIN_TAGS = frozenset(_STD_TAG + t for t in ("str", "int", "float", "bool", "null", "timestamp"))
_COLLECTION_TAGS = frozenset((_STD_TAG + "map", _STD_TAG + "seq"))
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_SURROGATE = re.compile("[\ud800-\udfff]")

# The largest frontmatter in examples/ and the built-in skills is under 3 KB and the Agent
# Skills corpus's longest (a 20,000-character license) 20 KB. 128 KiB leaves skill.yaml room
# for long inline prompts, yet the costliest document that size (a flow list of 65,000
# one-digit items) still loads quickly enough not to stall a worker.
MAX_YAML_BYTES = 128 * 1024
# The deepest skill in this repository nests 5 levels; 64 is far past any honest schema
# and well inside Python's recursion limit, which the builder's recursion relies on.
MAX_YAML_DEPTH = 64


class YamlProblem(Exception):
    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


@dataclass
class Parsed:
    """A YAML mapping with the 1-based source line of every key and list item."""

    data: dict[str, Any]
    lines: dict[Loc, int] = field(default_factory=dict)

    def line(self, loc: Loc) -> int | None:
        while loc:
            if loc in self.lines:
                return self.lines[loc]
            loc = loc[:-1]
        return None


def load_mapping(text: str, *, first_line: int = 1, raw_text_keys: frozenset[str] = frozenset()
                 ) -> Parsed:
    """Parse ``text`` that must hold one YAML mapping.

    ``raw_text_keys`` are top-level keys whose scalars are kept as the text written
    (and, for a mapping value, each of its scalars): Agent Skills fields are strings
    by specification, so ``description: yes`` means the word yes.
    """
    if found := _SURROGATE.search(text):  # not from a file read as UTF-8: text given in code
        raise YamlProblem(f"is not UTF-8 text (a lone surrogate, U+{ord(found.group()):04X}); "
                          "save the file as UTF-8", text.count("\n", 0, found.start()) + first_line)
    size = len(text.encode("utf-8"))
    if size > MAX_YAML_BYTES:
        raise YamlProblem(f"the YAML is {size:,} bytes, more than the {MAX_YAML_BYTES:,} "
                          f"({MAX_YAML_BYTES // 1024} KiB) skillq reads; shorten it: long text "
                          "belongs in the Markdown body or a file in the skill folder",
                          first_line)
    try:
        _refuse_anchors(text, first_line)
        node = yaml.compose(text, Loader=_Loader)
    except yaml.MarkedYAMLError as exc:
        # The problem mark is where the parser gave up; the context (an unclosed '[' on an
        # earlier line, say) is often where the user erred, so both are named.
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + first_line if mark is not None else None
        context = ""
        if exc.context and exc.context_mark is not None:
            context = f" ({exc.context} that starts at line {exc.context_mark.line + first_line})"
        raise YamlProblem(f"invalid YAML: {exc.problem or exc}{context}", line) from None
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow (NUL, say)
        line = text.count("\n", 0, exc.position) + first_line
        char = exc.character if isinstance(exc.character, int) else ord(exc.character[:1] or "?")
        raise YamlProblem(f"invalid YAML: character U+{char:04X} is not allowed in YAML; "
                          "remove it", line) from None
    except yaml.YAMLError as exc:
        raise YamlProblem(f"invalid YAML: {exc}") from None
    except RecursionError:
        # Only the pure-Python composer recurses per level; libyaml stops at 1000 itself.
        raise YamlProblem(_too_deep(), first_line) from None
    if node is None:
        return Parsed({})
    if not isinstance(node, yaml.MappingNode):
        raise YamlProblem("must be a YAML mapping of `field: value` lines, not a "
                          f"{_kind(node)}", node.start_mark.line + first_line)
    parsed = Parsed({})
    builder = _Builder(parsed.lines, first_line)
    for key, value in builder.pairs(node, ()):
        raw = key in raw_text_keys
        parsed.data[key] = builder.build(value, (key,), raw=raw)
    return parsed


def _refuse_anchors(text: str, first_line: int) -> None:
    """YamlProblem at the first anchor or alias: skill fields are written out in full.

    Refused rather than capped: expanding them is what made a 400-byte file take minutes
    and gigabytes, and a frontmatter has no repetition worth the indirection.
    """
    # Only '&' starts an anchor and only '*' an alias, so nearly every skill file skips
    # this second parse.
    if "&" not in text and "*" not in text:
        return
    for event in yaml.parse(text, Loader=_Loader):
        if not isinstance(event, yaml.NodeEvent) or event.anchor is None:
            continue
        used = ("the alias '*" if isinstance(event, yaml.AliasEvent) else "the anchor '&") \
            + f"{event.anchor}'"
        mark = event.start_mark
        raise YamlProblem(f"YAML anchors and aliases (&name / *name) are not allowed in skill "
                          f"files, and {used} is one; write the value out in full at each "
                          "place it is used", mark.line + first_line if mark else None)


def _nul(what: str) -> str:
    return (f"{what} holds a NUL byte (written \\0, \\x00 or \\u0000 in a quoted string), "
            "which skillq cannot store; remove it")


def _too_deep() -> str:
    return (f"the YAML is nested more than {MAX_YAML_DEPTH} levels deep; flatten it "
            "(skill fields need a few levels at most)")


def _kind(node: yaml.Node) -> str:
    return "list" if isinstance(node, yaml.SequenceNode) else "single value"


class _Builder:
    def __init__(self, lines: dict[Loc, int], first_line: int) -> None:
        self.lines = lines
        self.first = first_line

    def pairs(self, node: yaml.MappingNode, loc: Loc) -> Iterator[tuple[str, yaml.Node]]:
        seen: set[str] = set()
        for key_node, value in node.value:
            line = key_node.start_mark.line + self.first
            if not isinstance(key_node, yaml.ScalarNode):
                raise YamlProblem("a mapping key must be a plain name", line)
            key = str(key_node.value)
            if "\x00" in key:
                raise YamlProblem(_nul("a key"), line)
            if key in seen:
                where = ".".join(str(p) for p in (*loc, key))
                raise YamlProblem(f"duplicate key '{where}': keep one of them", line)
            seen.add(key)
            self.lines[(*loc, key)] = line
            yield key, value

    def build(self, node: yaml.Node, loc: Loc, *, raw: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode | yaml.SequenceNode):
            if node.tag not in _COLLECTION_TAGS:
                raise YamlProblem(f"YAML tag '{node.tag}' is not supported: remove it",
                                  node.start_mark.line + self.first)
            # loc has one part per collection above this one, the top mapping included.
            if len(loc) >= MAX_YAML_DEPTH:
                raise YamlProblem(_too_deep(), node.start_mark.line + self.first)
        if isinstance(node, yaml.MappingNode):
            return {k: self.build(v, (*loc, k), raw=raw) for k, v in self.pairs(node, loc)}
        if isinstance(node, yaml.SequenceNode):
            out = []
            for i, item in enumerate(node.value):
                self.lines[(*loc, i)] = item.start_mark.line + self.first
                out.append(self.build(item, (*loc, i), raw=raw))
            return out
        return self.scalar(node, raw=raw)

    def scalar(self, node: yaml.Node, *, raw: bool) -> Any:
        text = str(node.value)
        tag = str(node.tag)
        if tag not in _PLAIN_TAGS:
            raise YamlProblem(f"YAML tag '{tag}' is not supported: remove it",
                              node.start_mark.line + self.first)
        if "\x00" in text:  # a "\0" or "\x00" escape
            raise YamlProblem(_nul("a value"), node.start_mark.line + self.first)
        if raw or getattr(node, "style", None):
            return text
        # A plain scalar is typed by the core schema whatever PyYAML's 1.1 resolver
        # guessed (it calls 1e3 a string and yes a boolean).
        return core_scalar(text)


def core_scalar(text: str) -> Any:
    """Type a plain scalar by the YAML 1.2 core schema."""
    if text in ("", "~", "null", "Null", "NULL"):
        return None
    if text in ("true", "True", "TRUE"):
        return True
    if text in ("false", "False", "FALSE"):
        return False
    if _INT.match(text):
        return int(text)
    if _FLOAT.match(text):
        return float(text)
    if _INF.match(text):
        return float("-inf") if text.startswith("-") else float("inf")
    if _NAN.match(text):
        return float("nan")
    return text
