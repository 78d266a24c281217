"""(Re)create tests/corpus/agentskills/: skill folders for the Agent Skills parity test.

Run: python tests/corpus/make_agentskills_corpus.py

Every case is a row of CASES: the folder name (it matters: a skill's name must equal it),
the verdict we expect from `agentskills validate`, and the files as exact bytes or text
(written byte for byte, so BOM, CRLF and non-UTF-8 cases are reproducible and reviewable).
The expected verdict is documentation only: the test compares our validator with the
reference CLI itself and ignores this column.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent / "agentskills"

VALID, INVALID = True, False


@dataclass(frozen=True)
class Case:
    folder: str
    valid: bool
    files: dict[str, str | bytes]
    why: str


def skill(*lines: str, body: str = "# Instructions\n\nDo the thing.\n") -> str:
    """A SKILL.md: the frontmatter lines between '---' lines, then the body."""
    return "---\n" + "".join(line + "\n" for line in lines) + "---\n" + body


def basic(name: str, *extra: str, description: str = "Does one thing. Use it when needed.") -> str:
    return skill(f"name: {name}", f"description: {description}", *extra)


def case(folder: str, valid: bool, content: str | bytes | dict[str, str | bytes], why: str) -> Case:
    files = content if isinstance(content, dict) else {"SKILL.md": content}
    return Case(folder, valid, files, why)


NAME_64 = "a" * 60 + "-b64"
NAME_65 = "a" * 60 + "-b065"
DEEP = "".join("  " * i + f"k{i}:\n" for i in range(1500)) + "  " * 1500 + "leaf"

CASES = [
    # --- plain valid skills
    case("minimal", VALID, basic("minimal"), "name and description only"),
    case(
        "all-spec-fields",
        VALID,
        basic(
            "all-spec-fields",
            "license: Apache-2.0",
            "compatibility: Requires Python 3.11+ and network access",
            "metadata:",
            "  author: example-org",
            '  version: "1.0"',
            "allowed-tools: Bash(git:*) Read",
        ),
        "all six spec fields",
    ),
    case("no-body", VALID, "---\nname: no-body\ndescription: Nothing follows.\n---", "no body"),
    case(
        "lowercase-file",
        VALID,
        {"skill.md": basic("lowercase-file")},
        "only skill.md (lowercase), which the reference accepts",
    ),
    case("missing-skill-md", INVALID, {"README.md": "# no SKILL.md here\n"}, "no SKILL.md"),
    case(
        "titlecase-file",
        INVALID,
        {"Skill.md": basic("titlecase-file")},
        "Skill.md is neither SKILL.md nor skill.md (on a case-sensitive file system)",
    ),
    case(
        "skill-md-is-directory",
        INVALID,
        {"SKILL.md/notes.txt": "a directory named SKILL.md\n"},
        "reference finds it with exists() and crashes reading it (IsADirectoryError)",
    ),
    # --- YAML 1.1 would type these; strictyaml without a schema keeps every scalar a string
    case(
        "yaml11-unquoted",
        VALID,
        skill(
            "name: yaml11-unquoted",
            "description: yes",
            "license: no",
            "compatibility: 0x10",
            "allowed-tools: null",
            "metadata:",
            "  on: off",
            "  tilde: ~",
            "  int: 123",
            "  float: 1.0",
            "  date: 2024-01-01",
            "  inf: .inf",
        ),
        "typed-looking unquoted values are strings",
    ),
    case(
        "yaml11-quoted",
        VALID,
        skill(
            "name: 'yaml11-quoted'",
            'description: "no"',
            "license: 'on'",
            'compatibility: "1.0"',
            "allowed-tools: '~'",
            "metadata:",
            '  a: "null"',
            "  b: '2024-01-01'",
        ),
        "the same values quoted",
    ),
    case("123", VALID, basic("123"), "a numeric-looking name is the string '123'"),
    case("null", VALID, basic("null"), "name: null is the string 'null'"),
    case("yes", VALID, basic("yes"), "name: yes is the string 'yes'"),
    case("0x10", VALID, basic("0x10"), "hex-looking name"),
    case("2024-01-01", VALID, basic("2024-01-01"), "date-looking name"),
    case("tilde-name", INVALID, basic("~"), "name ~ is the string '~': invalid character"),
    case("dot-inf-name", INVALID, basic(".inf"), "name .inf: '.' is not allowed"),
    case("float-name", INVALID, basic("1.0"), "name 1.0: '.' is not allowed"),
    case("yaml11-description", VALID, basic("yaml11-description", description="~"), "desc ~"),
    # --- empty and blank values
    case("empty-name", INVALID, skill("name:", "description: x"), "name with no value"),
    case("empty-quoted-name", INVALID, skill('name: ""', "description: x"), 'name: ""'),
    case("missing-name", INVALID, skill("description: x"), "no name field"),
    case("missing-description", INVALID, skill("name: missing-description"), "no description"),
    case(
        "empty-description",
        INVALID,
        skill("name: empty-description", "description:"),
        "description with no value",
    ),
    case(
        "blank-description",
        INVALID,
        skill("name: blank-description", 'description: "   "'),
        "whitespace-only quoted description",
    ),
    case(
        "empty-optional-fields",
        VALID,
        basic("empty-optional-fields", "license:", "compatibility:", "metadata:", "allowed-tools:"),
        "empty optional fields pass, even compatibility (the spec says 1-500 chars)",
    ),
    case(
        "padded-name",
        VALID,
        skill('name: "  padded-name  "', "description: x"),
        "the reference strips the name before checking it",
    ),
    # --- lengths
    case(
        "description-1024",
        VALID,
        basic("description-1024", description="d" * 1024),
        "description exactly 1024 characters",
    ),
    case(
        "description-1025",
        INVALID,
        basic("description-1025", description="d" * 1025),
        "description 1025 characters",
    ),
    case(
        "description-1024-accented",
        VALID,
        basic("description-1024-accented", description="é" * 1024),
        "1024 characters but 2048 bytes: characters count",
    ),
    case(NAME_64, VALID, basic(NAME_64), "name exactly 64 characters"),
    case(NAME_65, INVALID, basic(NAME_65), "name 65 characters"),
    case(
        "compatibility-500",
        VALID,
        basic("compatibility-500", "compatibility: " + "c" * 500),
        "compatibility exactly 500",
    ),
    case(
        "compatibility-501",
        INVALID,
        basic("compatibility-501", "compatibility: " + "c" * 501),
        "compatibility 501",
    ),
    case(
        "very-long-lines",
        VALID,
        basic("very-long-lines", "license: " + "L" * 20000) + "x" * 200000 + "\n",
        "a 20k-char license line and a 200k-char body line",
    ),
    # --- hyphens and characters
    case("double--hyphen", INVALID, basic("double--hyphen"), "consecutive hyphens"),
    case("-leading-hyphen", INVALID, basic("-leading-hyphen"), "leading hyphen"),
    case("trailing-hyphen-", INVALID, basic("trailing-hyphen-"), "trailing hyphen"),
    case("under_score", INVALID, basic("under_score"), "underscore"),
    case("Upper-Case", INVALID, basic("Upper-Case"), "uppercase ASCII"),
    case("name-mismatch", INVALID, basic("other-name"), "name differs from folder"),
    case("key-quoted", VALID, skill("'name': key-quoted", '"description": x'), "quoted keys"),
    # --- unicode names
    case("café", VALID, basic("café"), "lowercase non-ASCII letters are allowed"),
    case("straße", VALID, basic("straße"), "ß is lowercase"),
    case("技能", VALID, basic("技能"), "CJK letters have no case and are alnum"),
    case("σκιλ", VALID, basic("σκιλ"), "Greek lowercase"),
    case("skill-٣", VALID, basic("skill-٣"), "Arabic-Indic digit is alnum"),
    case("Café-upper", INVALID, basic("Café-upper"), "uppercase non-ASCII"),
    case("ǅemal", INVALID, basic("ǅemal"), "titlecase letter ǅ is not lowercase"),
    case(
        "cafe\u0301-nfd",
        VALID,
        basic("cafe\u0301-nfd"),
        "NFD name and folder: both NFKC-normalise to NFC 'café-nfd'",
    ),
    case(
        "café-mixed",
        VALID,
        basic("cafe\u0301-mixed"),
        "NFD name, NFC folder: equal after NFKC",
    ),
    case(
        "\ufb01le-ligature",
        VALID,
        basic("file-ligature"),
        "folder with the ﬁ ligature, name with 'fi': equal after NFKC",
    ),
    case(
        "ｆｕｌｌｗｉｄｔｈ",
        VALID,
        basic("ｆｕｌｌｗｉｄｔｈ"),
        "fullwidth letters NFKC-normalise to ASCII lowercase",
    ),
    case(
        "\ufb01" * 33,
        INVALID,
        basic("\ufb01" * 33),
        "33 ligature characters become 66 after NFKC: over 64",
    ),
    case(
        "x\u0301\u0301-marks",
        INVALID,
        basic("x\u0301\u0301-marks"),
        "combining marks that do not compose are not alnum",
    ),
    case(
        "escaped-surrogate",
        VALID,
        basic("escaped-surrogate", description='"lone \\ud800 surrogate"'),
        "a double-quoted escape yields a lone surrogate; the reference does not mind",
    ),
    # --- frontmatter delimiters
    case("not-closed", INVALID, "---\nname: not-closed\ndescription: x\n", "no closing ---"),
    case("no-frontmatter", INVALID, "# not-frontmatter\n\nJust markdown.\n", "no --- at all"),
    case(
        "dashes-in-quoted-value",
        INVALID,
        skill("name: dashes-in-quoted-value", 'description: "before --- after"'),
        "the split at the first two '---' cuts the quoted value: YAML error",
    ),
    case(
        "dashes-in-plain-value",
        VALID,
        skill("name: dashes-in-plain-value", "description: before---after"),
        "the split cuts the value to 'before' and the reference accepts it",
    ),
    case(
        "dashes-cut-description",
        INVALID,
        skill("name: dashes-cut-description", "license: MIT---X", "description: x"),
        "the split at 'MIT---' drops the description that follows",
    ),
    case(
        "opening-dashes-glued",
        VALID,
        "---name: opening-dashes-glued\ndescription: x\n---\n",
        "text right after the opening --- is frontmatter",
    ),
    case(
        "opening-four-dashes",
        INVALID,
        "----\nname: opening-four-dashes\ndescription: x\n---\n",
        "'----' splits into an empty frontmatter",
    ),
    case(
        "opening-dashes-then-space-key",
        INVALID,
        "--- name: opening-dashes-then-space-key\ndescription: x\n---\n",
        "the first key ends up indented by one space: YAML error",
    ),
    case(
        "closing-dashes-glued",
        VALID,
        "---\nname: closing-dashes-glued\ndescription: x---\nbody\n",
        "'x---' closes the frontmatter mid-line",
    ),
    case(
        "body-with-dashes",
        VALID,
        basic("body-with-dashes") + "\n---\n\nMore.\n\n---\nname: Not-Parsed\n---\n",
        "horizontal rules and a fake frontmatter in the body are ignored",
    ),
    case("leading-bom", INVALID, "\ufeff" + basic("leading-bom"), "a UTF-8 BOM before '---'"),
    case("leading-blank-line", INVALID, "\n" + basic("leading-blank-line"), "blank line first"),
    case("leading-space", INVALID, " " + basic("leading-space"), "a space before '---'"),
    case("empty-frontmatter", INVALID, "---\n---\nbody\n", "nothing between the delimiters"),
    case("comment-only-frontmatter", INVALID, "---\n# just a comment\n---\n", "only a comment"),
    case("frontmatter-list", INVALID, skill("- name", "- description"), "a YAML list"),
    case("frontmatter-scalar", INVALID, skill("just some text"), "a plain scalar"),
    # --- line endings and whitespace
    case(
        "crlf",
        VALID,
        basic("crlf", "metadata:", "  a: b").replace("\n", "\r\n"),
        "CRLF line endings (read_text turns them into LF)",
    ),
    case(
        "cr-only",
        VALID,
        basic("cr-only").replace("\n", "\r"),
        "old-Mac CR line endings (read_text turns them into LF too)",
    ),
    case(
        "tab-indent",
        INVALID,
        basic("tab-indent", "metadata:", "\tauthor: x"),
        "tab indentation",
    ),
    case(
        "tab-after-colon",
        INVALID,
        skill("name: tab-after-colon", "description:\tx"),
        "a tab as the separator after ':' is refused by strictyaml's ruamel",
    ),
    case(
        "tab-inside-value",
        INVALID,
        skill("name: tab-inside-value", "description: a\tb"),
        "a tab inside a plain scalar is refused by strictyaml's ruamel",
    ),
    case(
        "tab-inside-quoted-value",
        VALID,
        skill("name: tab-inside-quoted-value", "description: 'a\tb'"),
        "a tab inside quotes is fine",
    ),
    case(
        "control-char-frontmatter",
        INVALID,
        basic("control-char-frontmatter", description="bell\x07here"),
        "strictyaml dies with AttributeError on the control character; the reference crashes",
    ),
    case(
        "control-char-body",
        VALID,
        basic("control-char-body") + "nul \x00 bell \x07\n",
        "control characters in the body are never parsed",
    ),
    case(
        "non-utf8-frontmatter",
        INVALID,
        basic("non-utf8-frontmatter", description="caf\udce9").encode("utf-8", "surrogateescape"),
        "a Latin-1 byte in the frontmatter: the reference crashes with UnicodeDecodeError",
    ),
    case(
        "non-utf8-body",
        INVALID,
        (basic("non-utf8-body") + "caf\udce9\n").encode("utf-8", "surrogateescape"),
        "a Latin-1 byte in the body: the whole file is decoded, so the reference crashes",
    ),
    # --- YAML constructs strictyaml refuses
    case(
        "duplicate-keys",
        INVALID,
        skill("name: duplicate-keys", "description: one", "description: two"),
        "duplicate key",
    ),
    case(
        "flow-mapping",
        INVALID,
        basic("flow-mapping", "metadata: {author: x}"),
        "flow mapping",
    ),
    case(
        "flow-sequence",
        INVALID,
        basic("flow-sequence", "allowed-tools: [Read, Write]"),
        "flow sequence",
    ),
    case(
        "flow-in-quotes",
        VALID,
        basic("flow-in-quotes", "allowed-tools: '[Read, Write]'"),
        "flow syntax inside quotes is text",
    ),
    case(
        "anchor-alias",
        INVALID,
        basic("anchor-alias", "license: &lic MIT", "compatibility: *lic"),
        "anchor and alias",
    ),
    case(
        "explicit-tag",
        INVALID,
        skill("name: explicit-tag", "description: !!str yes"),
        "explicit tag",
    ),
    case(
        "complex-key",
        INVALID,
        basic("complex-key", "? - a", ": b"),
        "strictyaml dies with AssertionError on a sequence key; the reference crashes",
    ),
    case(
        "complex-key-unhashable",
        INVALID,
        basic("complex-key-unhashable", "? - a: b", ": c"),
        "strictyaml dies with TypeError (unhashable key); the reference crashes",
    ),
    case(
        "deep-nesting",
        INVALID,
        basic("deep-nesting", "metadata:", *("  " + line for line in DEEP.splitlines())),
        "1500 nested maps: RecursionError in strictyaml; the reference crashes",
    ),
    case(
        "colon-in-value",
        INVALID,
        skill("name: colon-in-value", "description: Use when: the user asks"),
        "an unquoted ': ' inside a value",
    ),
    case(
        "colon-in-quoted-value",
        VALID,
        skill("name: colon-in-quoted-value", 'description: "Use when: the user asks"'),
        "the same value quoted",
    ),
    case(
        "document-end-marker",
        INVALID,
        skill("name: document-end-marker", "...", "description: x"),
        "'...' ends the YAML document; the rest is a second document",
    ),
    case(
        "bad-indentation",
        INVALID,
        skill("name: bad-indentation", "description: x", "  license: MIT"),
        "an indented key after a scalar value",
    ),
    # --- YAML constructs strictyaml accepts
    case(
        "block-literal",
        VALID,
        skill("name: block-literal", "description: |", "  Line one.", "  Line two."),
        "literal block scalar",
    ),
    case(
        "block-folded",
        VALID,
        skill("name: block-folded", "description: >-", "  Folded", "  text."),
        "folded block scalar with strip chomping",
    ),
    case(
        "block-literal-empty",
        INVALID,
        skill("name: block-literal-empty", "description: |", "license: MIT"),
        "an empty literal block is an empty description",
    ),
    case(
        "multiline-plain",
        VALID,
        skill("name: multiline-plain", "description: A plain scalar", "  over two lines."),
        "multi-line plain scalar",
    ),
    case(
        "comments",
        VALID,
        skill(
            "# leading comment",
            "name: comments  # trailing comment",
            "description: Use C# tools, see #1",
            "# closing comment",
        ),
        "comments; ' #' starts a comment, 'C#' does not",
    ),
    case(
        "hash-cut-description",
        INVALID,
        skill("name: hash-cut-description", "description: #1 tool"),
        "'#' right after the colon makes the whole value a comment: empty description",
    ),
    # --- optional fields of other shapes (the reference checks only compatibility)
    case(
        "metadata-nested",
        VALID,
        basic("metadata-nested", "metadata:", "  outer:", "    inner: x", "  list:", "    - 1"),
        "nested metadata is stringified, not refused",
    ),
    case("metadata-string", VALID, basic("metadata-string", "metadata: just text"), "a string"),
    case(
        "metadata-list",
        VALID,
        basic("metadata-list", "metadata:", "  - a", "  - b"),
        "a list as metadata passes",
    ),
    case(
        "metadata-non-string-values",
        VALID,
        basic("metadata-non-string-values", "metadata:", "  count: 3", "  enabled: true"),
        "numbers and booleans are strings anyway",
    ),
    case(
        "compatibility-list",
        INVALID,
        basic("compatibility-list", "compatibility:", "  - python3", "  - git"),
        "compatibility must be a string",
    ),
    case(
        "license-list",
        VALID,
        basic("license-list", "license:", "  - MIT", "  - Apache-2.0"),
        "license is not checked",
    ),
    case(
        "allowed-tools-list",
        VALID,
        basic("allowed-tools-list", "allowed-tools:", "  - Read", "  - Bash"),
        "allowed-tools is not checked",
    ),
    case(
        "description-list",
        INVALID,
        skill("name: description-list", "description:", "  - a"),
        "description must be a string",
    ),
    case(
        "name-map",
        INVALID,
        skill("name:", "  first: x", "description: y"),
        "name must be a string",
    ),
    # --- fields outside the spec
    case("unknown-field", INVALID, basic("unknown-field", "version: 1"), "skillq's version"),
    case("typo-field", INVALID, basic("typo-field", "licence: MIT"), "a typo of license"),
    case("uppercase-key", INVALID, skill("Name: uppercase-key", "description: x"), "Name"),
    case("empty-key", INVALID, basic("empty-key", ": orphan"), "a key that is empty"),
]


def build(root: Path = ROOT) -> None:
    """Remove `root` and write every case under it."""
    folders = [c.folder for c in CASES]
    # Unique even on case-insensitive file systems, so a checkout holds every case.
    assert len({f.casefold() for f in folders}) == len(folders), "duplicate case folder"
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    # Keep git from touching line endings or bytes: the CRLF, CR and BOM cases depend on them.
    (root / ".gitattributes").write_text("* -text\n", encoding="utf-8")
    for c in CASES:
        for relative, content in c.files.items():
            target = root / c.folder / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            data = content.encode("utf-8") if isinstance(content, str) else content
            target.write_bytes(data)


if __name__ == "__main__":
    build()
    valid = sum(c.valid for c in CASES)
    print(f"wrote {len(CASES)} cases to {ROOT} ({valid} valid, {len(CASES) - valid} invalid)")
