"""The `skillq` command line, driven as a user drives it: the real console script in a
subprocess, with --vault, on the example vaults and on scratch vaults under tmp_path.

Every run is checked for what a user relies on: the exit code the command documents
(0 ok, 1 a problem found, 2 a usage error) and never a Python traceback. Expectations are
computed from the vault loaded in-process (shared.vault.load_vault), so the tests cover
examples/youtube too once it is finished, without hard-coding its contents.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from shared.inputs import with_defaults
from shared.manifest import SPEC_FIELDS, Approach, Manifest
from shared.skill import Skill, SkillForm
from shared.stepgraph import step_dependencies
from shared.vault import Vault, load_vault

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
ANTHROPIC = ROOT / "tests" / "fixtures" / "anthropic-layout" / "skills"
SKILLQ = Path(sys.executable).with_name("skillq")
AGENTSKILLS = Path(sys.executable).with_name("agentskills")
DOT = shutil.which("dot")

# Example vault -> its orchestrator.
EXAMPLE_VAULTS = {"git-digest": "git-digest", "youtube": "youtube-creator-analytics"}
WIDE = 250  # COLUMNS for commands whose tables would otherwise fold long cells
MANIFEST_FILES = {"SKILL.md", "skill.md", "skill.yaml"}


# --------------------------------------------------------------------------- helpers


@dataclass(frozen=True)
class Run:
    args: tuple[str, ...]
    code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def _env(columns: int | None) -> dict[str, str]:
    drop = {"COLUMNS", "LINES", "FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"}
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("SKILLQ_")}
    env["NO_COLOR"] = "1"
    if columns is not None:
        env["COLUMNS"] = str(columns)
    return env


def skillq(*args: str | Path, cwd: Path, expect: int | None = 0,
           columns: int | None = None) -> Run:
    """Run the console script; assert no traceback and (unless expect is None) the exit code."""
    argv = tuple(str(a) for a in args)
    proc = subprocess.run([str(SKILLQ), *argv], capture_output=True, text=True,
                          encoding="utf-8", timeout=60, cwd=cwd, env=_env(columns))
    run = Run(argv, proc.returncode, proc.stdout, proc.stderr)
    shown = f"skillq {shlex.join(argv)} (exit {run.code}):\n{run.output}"
    assert "Traceback" not in run.output, f"a traceback reached the user: {shown}"
    if expect is not None:
        assert run.code == expect, f"expected exit {expect}: {shown}"
    return run


def reference(folders: Iterable[Path]) -> dict[str, Run]:
    """`agentskills validate FOLDER` (the reference validator) for each folder, by name."""
    def one(folder: Path) -> tuple[str, Run]:
        proc = subprocess.run([str(AGENTSKILLS), "validate", str(folder)], capture_output=True,
                              text=True, encoding="utf-8", timeout=60)
        return folder.name, Run(("validate", str(folder)), proc.returncode, proc.stdout,
                                proc.stderr)
    with ThreadPoolExecutor(max_workers=4) as pool:
        return dict(pool.map(one, list(folders)))


def reference_properties(folder: Path) -> dict[str, Any]:
    proc = subprocess.run([str(AGENTSKILLS), "read-properties", str(folder)],
                          capture_output=True, text=True, encoding="utf-8", timeout=60,
                          check=True)
    return dict(json.loads(proc.stdout))


def folders_of(vault: Path) -> list[Path]:
    """The skill folders as a user counts them: every visible sub-folder."""
    return sorted(p for p in vault.iterdir()
                  if p.is_dir() and not p.name.startswith(".") and p.name != "__pycache__")


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


def written_fields(manifest: Manifest) -> dict[str, Any]:
    return manifest.model_dump(mode="json", by_alias=True, exclude_unset=True)


def assert_same_skills(original: Vault, copy: Vault, forms: dict[str, SkillForm]) -> None:
    """Same skill names, equal manifests (values and which fields were written), same
    Markdown body, and every other file byte for byte."""
    assert set(copy.skills) == set(original.skills)
    for name, skill in original.skills.items():
        other = copy.skills[name]
        assert other.manifest == skill.manifest, name
        assert written_fields(other.manifest) == written_fields(skill.manifest), name
        assert other.body.strip() == skill.body.strip(), name
        assert other.form == forms[name], name
        extra = {k: v for k, v in snapshot(skill.folder).items()
                 if k not in MANIFEST_FILES and "__pycache__" not in k}
        assert {k: v for k, v in snapshot(other.folder).items()
                if k not in MANIFEST_FILES} == extra, name


def has_execution_fields(skill: Skill) -> bool:
    return bool(set(written_fields(skill.manifest)) - SPEC_FIELDS)


def reachable(vault: Vault, root: str) -> list[str]:
    """Every skill that ``root`` uses, directly or not (through steps or sub-skills.json)."""
    seen: list[str] = []
    todo = list(calls(vault.skills[root]))
    while todo:
        name = todo.pop(0)
        if name in seen:
            continue
        seen.append(name)
        if name in vault.skills:
            todo.extend(calls(vault.skills[name]))
    return seen


def edge_count(vault: Vault, root: str) -> int:
    """Edges of the sub-skill DAG drawn from ``root``: one per step or sub-skills.json entry
    of every skill reached."""
    return sum(len(calls(vault.skills[n])) for n in [root, *reachable(vault, root)]
               if n in vault.skills)


def calls(skill: Skill) -> list[str]:
    if skill.manifest.steps:
        return [s.skill_name for s in skill.manifest.steps]
    return list(skill.sub_skills.names) if skill.sub_skills else []


def write_skill(vault: Path, name: str, front: str, body: str = "Follow the steps.\n") -> Path:
    """A SKILL.md written byte for byte (``front`` is the YAML between the '---' lines)."""
    folder = vault / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(f"---\n{front}---\n\n# {name}\n\n{body}", encoding="utf-8")
    return folder


@dataclass(frozen=True)
class Example:
    name: str
    path: Path
    orchestrator: str

    def load(self) -> Vault:
        return load_vault(self.path)


GIT_DIGEST = Example("git-digest", EXAMPLES / "git-digest", "git-digest")


@pytest.fixture(params=sorted(EXAMPLE_VAULTS))
def example(request: pytest.FixtureRequest) -> Example:
    name = request.param
    return Example(name, EXAMPLES / name, EXAMPLE_VAULTS[name])


@pytest.fixture(scope="session")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty working directory: no stray .env or ./vault is picked up."""
    return tmp_path_factory.mktemp("cwd")


# ------------------------------------------------------------ validate, list, catalog, show


def test_validate_example_vault(example: Example, workdir: Path) -> None:
    run = skillq("validate", example.path, cwd=workdir)
    assert f"✓ {len(folders_of(example.path))} skill(s) valid" in run.stdout


def test_list_shows_every_skill(example: Example, workdir: Path) -> None:
    run = skillq("list", "--vault", example.path, cwd=workdir, columns=WIDE)
    for folder in folders_of(example.path):
        assert re.search(rf"(^|\W){re.escape(folder.name)}(\W|$)", run.stdout, re.M), \
            f"{folder.name} missing from:\n{run.stdout}"
    assert "orchestrator" in run.stdout


def test_list_in_a_pipe_keeps_long_names_whole(tmp_path: Path) -> None:
    name = "a-rather-long-skill-name-for-a-narrow-table"
    write_skill(tmp_path / "vault", name,
                f"name: {name}\ndescription: Summarise text. Use it for long texts.\n")
    run = skillq("list", "--vault", tmp_path / "vault", cwd=tmp_path)  # 80 columns
    assert name in run.stdout and "Summarise" in run.stdout, run.stdout


def test_catalog_prints_one_line_per_skill(example: Example, workdir: Path) -> None:
    run = skillq("catalog", "--vault", example.path, cwd=workdir)
    lines = run.stdout.splitlines()
    folders = folders_of(example.path)
    assert len(lines) == len(folders), run.stdout
    vault = example.load()
    for line, folder in zip(lines, folders, strict=True):
        name, sep, description = line.partition(": ")
        assert sep and name == folder.name
        assert description == " ".join(vault.skills[name].manifest.description.split())


def test_catalog_xml_is_well_formed(example: Example, workdir: Path) -> None:
    run = skillq("catalog", "--format", "xml", "--vault", example.path, cwd=workdir)
    root = ET.fromstring(run.stdout)
    assert root.tag == "available_skills"
    entries = root.findall("skill")
    assert len(entries) == len(folders_of(example.path))
    vault = example.load()
    names = []
    for entry in entries:
        name = (entry.findtext("name") or "").strip()
        names.append(name)
        assert (entry.findtext("description") or "").strip() == \
            vault.skills[name].manifest.description.strip()
        location = Path((entry.findtext("location") or "").strip())
        assert location.is_absolute() and location.is_file(), location
        assert location.name == "SKILL.md" and location.parent.name == name
    assert sorted(names) == [f.name for f in folders_of(example.path)]


def test_show_orchestrator(example: Example, workdir: Path) -> None:
    skill = example.load().skills[example.orchestrator]
    m = skill.manifest
    run = skillq("show", example.orchestrator, "--vault", example.path, cwd=workdir,
                 columns=WIDE)
    out = run.stdout
    for section in ("inputs", "outputs", "steps", "sub-skills", "test cases"):
        assert re.search(rf"^{section}$", out, re.M), f"no {section} table:\n{out}"
    assert skill.sub_skills and skill.benchmarks and m.steps
    expected = [*(i.name for i in m.inputs), *(o.name for o in m.outputs),
                *(s.id for s in m.steps), *(s.skill for s in m.steps),
                *skill.sub_skills.names, *(t.id for t in skill.benchmarks.tests)]
    missing = [word for word in expected if word not in out]
    assert not missing, f"{missing} not shown:\n{out}"
    assert "problem:" not in out


def test_show_leaf(example: Example, workdir: Path) -> None:
    vault = example.load()
    leaf = next(s for n, s in sorted(vault.skills.items()) if s.manifest.run is not None)
    out = skillq("show", leaf.name, "--vault", example.path, cwd=workdir, columns=WIDE).stdout
    assert leaf.manifest.run and leaf.manifest.run.command in out
    assert not re.search(r"^steps$", out, re.M)
    for word in [*(i.name for i in leaf.manifest.inputs), *(o.name for o in leaf.manifest.outputs),
                 *(t.id for t in (leaf.benchmarks.tests if leaf.benchmarks else ()))]:
        assert word in out, f"{word} not shown:\n{out}"


def test_show_unknown_skill_exits_2_with_a_hint(workdir: Path) -> None:
    example = GIT_DIGEST
    run = skillq("show", "nope", "--vault", example.path, cwd=workdir, expect=2)
    assert "no skill named 'nope'" in run.stderr
    assert "did you mean" in run.stderr or "skillq list" in run.stderr
    typo = example.orchestrator[:-2] + example.orchestrator[-1] + example.orchestrator[-2]
    run = skillq("show", typo, "--vault", example.path, cwd=workdir, expect=2)
    assert f"did you mean '{example.orchestrator}'?" in run.stderr


# --------------------------------------------------------------------------------- graph

TREE = r"[\s│├└─]*"  # the branch glyphs of a rich tree before a node
NODE = re.compile(r'^\s*(\S+)\["([^"]*)"\]\s*$')
MERMAID_EDGE = re.compile(r'^\s*(\S+) -->(?:\|"([^"]*)"\|)? (\S+)\s*$')
DOT_EDGE = re.compile(r'^\s*"([^"]+)" -> "([^"]+)"(?: \[label="([^"]*)"\])?;\s*$')


def mermaid_graph(text: str) -> tuple[dict[str, str], list[tuple[str, str, str]]]:
    """(node id -> label, [(from label, edge label, to label)])."""
    nodes: dict[str, str] = {}
    edges: list[tuple[str, str, str]] = []
    for line in text.splitlines()[1:]:
        if match := NODE.match(line):
            nodes[match[1]] = match[2]
        elif match := MERMAID_EDGE.match(line):
            edges.append((match[1], match[2] or "", match[3]))
        elif line.strip():
            pytest.fail(f"unexpected Mermaid line {line!r} in:\n{text}")
    return nodes, [(nodes[a], label, nodes[b]) for a, label, b in edges]


def dot_edges(text: str) -> list[tuple[str, str, str]]:
    lines = text.strip().splitlines()
    assert lines[0].startswith("digraph ") and lines[0].endswith("{"), text
    assert lines[-1] == "}" and text.count("{") == text.count("}"), text
    return [(m[1], m[3] or "", m[2]) for line in lines if (m := DOT_EDGE.match(line))]


def assert_dot_renders(text: str) -> None:
    if DOT is None:  # Graphviz not installed: the syntax checks above still ran
        return
    proc = subprocess.run([DOT, "-Tsvg"], input=text, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "<svg" in proc.stdout


def test_graph_tree_shows_every_sub_skill(example: Example, workdir: Path) -> None:
    vault = example.load()
    out = skillq("graph", example.orchestrator, "--vault", example.path, cwd=workdir,
                 columns=WIDE).stdout
    assert out.splitlines()[0].startswith(example.orchestrator)
    used = reachable(vault, example.orchestrator)
    assert used
    for name in used:
        assert name in out, f"{name} missing from:\n{out}"
    for step in vault.skills[example.orchestrator].manifest.steps or ():
        assert re.search(rf"^{TREE}{re.escape(step.id)}\b.*→ {re.escape(step.skill_name)}\b",
                         out, re.M), f"step {step.id} missing from:\n{out}"


def test_graph_mermaid_has_one_edge_per_step(example: Example, workdir: Path) -> None:
    vault = example.load()
    steps = vault.skills[example.orchestrator].manifest.steps or ()
    out = skillq("graph", example.orchestrator, "--format", "mermaid", "--vault", example.path,
                 cwd=workdir).stdout
    assert out.splitlines()[0] == "graph TD"
    nodes, edges = mermaid_graph(out)
    assert set(nodes.values()) == {example.orchestrator, *reachable(vault, example.orchestrator)}
    from_root = [(label.split()[0], callee) for caller, label, callee in edges
                 if caller == example.orchestrator]
    assert from_root == [(s.id, s.skill_name) for s in steps]
    fanned = [label for caller, label, _ in edges if caller == example.orchestrator
              and "for each" in label]
    assert len(fanned) == sum(s.for_each is not None for s in steps)
    assert len(edges) == edge_count(vault, example.orchestrator)


def test_graph_dot_is_valid_graphviz(example: Example, workdir: Path) -> None:
    vault = example.load()
    steps = vault.skills[example.orchestrator].manifest.steps or ()
    out = skillq("graph", example.orchestrator, "--format", "dot", "--vault", example.path,
                 cwd=workdir).stdout
    edges = dot_edges(out)
    assert [(label.split()[0], callee) for caller, label, callee in edges
            if caller == example.orchestrator] == [(s.id, s.skill_name) for s in steps]
    assert len(edges) == edge_count(vault, example.orchestrator)
    assert_dot_renders(out)


def test_graph_steps_draws_step_dependencies(example: Example, workdir: Path) -> None:
    manifest = example.load().skills[example.orchestrator].manifest
    deps = step_dependencies(manifest)
    waits = {(dep, sid) for sid, ds in deps.items() for dep in ds}
    assert waits, "an example orchestrator whose steps wait for nothing tests nothing"
    base = ("graph", example.orchestrator, "--steps", "--vault", example.path)

    tree = skillq(*base, cwd=workdir, columns=WIDE).stdout
    for step in manifest.steps or ():
        line = next(x for x in tree.splitlines()
                    if re.match(rf"{TREE}{re.escape(step.id)} →", x))
        assert step.skill in line
        after = re.search(r"\(after ([^)]*)\)", line)
        assert (after[1].split(", ") if after else []) == deps[step.id], line

    mermaid = skillq(*base, "--format", "mermaid", cwd=workdir).stdout
    assert mermaid.startswith("graph ")
    nodes, edges = mermaid_graph(mermaid)
    step_of = {label: label.split(":")[0] for label in nodes.values()}
    assert {(step_of[a], step_of[b]) for a, _, b in edges} == waits

    dot = skillq(*base, "--format", "dot", cwd=workdir).stdout
    assert {(a, b) for a, _, b in dot_edges(dot)} == waits
    assert_dot_renders(dot)

    if example.name == "git-digest":  # the report waits for the statistics and the chart
        assert {("stats", "report"), ("chart", "report"), ("commits", "stats")} <= waits


def test_graph_errors(workdir: Path) -> None:
    example = GIT_DIGEST
    leaf = next(n for n, s in sorted(example.load().skills.items()) if not s.manifest.steps)
    run = skillq("graph", leaf, "--steps", "--vault", example.path, cwd=workdir, expect=1)
    assert "has no steps" in run.output
    skillq("graph", "nope", "--vault", example.path, cwd=workdir, expect=2)
    run = skillq("graph", example.orchestrator, "--format", "png", "--vault", example.path,
                 cwd=workdir, expect=2)
    assert "png" in run.stderr


# ----------------------------------------------------------------------------------- new


def run_script(skill: Skill, inputs: dict[str, Any], scratch: Path) -> tuple[int, Any, str]:
    """Run a leaf as a worker does: a copy of its folder, scrubbed env, inputs as file + stdin.
    Returns (exit code, outputs or None, stderr)."""
    assert skill.manifest.run is not None
    folder = scratch / "run"
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(skill.folder, folder)
    values = with_defaults(skill.manifest, inputs)
    (scratch / "inputs.json").write_text(json.dumps(values), encoding="utf-8")
    output = scratch / "output.json"
    output.unlink(missing_ok=True)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(scratch),
           "LANG": "C.UTF-8", "SKILL_INPUTS": str(scratch / "inputs.json"),
           "SKILL_OUTPUT": str(output)}
    proc = subprocess.run(shlex.split(skill.manifest.run.command), cwd=folder, env=env,
                          input=json.dumps(values), capture_output=True, text=True, timeout=60)
    if output.exists():
        outputs = json.loads(output.read_text(encoding="utf-8"))
    else:
        last = proc.stdout.strip().splitlines()[-1:] or ["null"]
        outputs = json.loads(last[0]) if proc.returncode == 0 else None
    return proc.returncode, outputs, proc.stderr


def test_new_leaf_is_valid_and_its_script_passes_its_own_benchmarks(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    run = skillq("new", "my-skill", "--vault", vault, cwd=tmp_path)
    assert "created" in run.stdout
    folder = vault / "my-skill"
    for name in ("SKILL.md", "plan.md", "benchmarks.json", "sub-skills.json", "main.py"):
        assert (folder / name).is_file(), name
    assert "✓ 1 skill(s) valid" in skillq("validate", folder, cwd=tmp_path).stdout
    skill = load_vault(vault).skills["my-skill"]
    assert skill.manifest.kind == "script" and skill.benchmarks and skill.benchmarks.tests
    declared = {o.name for o in skill.manifest.outputs}
    assert any(t.expected.success for t in skill.benchmarks.tests)
    assert any(not t.expected.success for t in skill.benchmarks.tests)
    for test in skill.benchmarks.tests:
        code, outputs, stderr = run_script(skill, dict(test.inputs), tmp_path)
        exp = test.expected
        if exp.success:
            assert code == 0, f"{test.id}: exit {code}: {stderr}"
            assert isinstance(outputs, dict) and set(outputs) == declared, test.id
            for key, value in exp.output_values.items():
                assert outputs[key] == value, test.id
            for text in exp.contains:
                assert text in json.dumps(outputs), test.id
        else:
            assert code not in (0, 75), f"{test.id}: a bad input must fail permanently"
            assert exp.error_contains and exp.error_contains in stderr, (test.id, stderr)


def test_new_refuses_an_existing_skill_and_bad_names(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    skillq("new", "my-skill", "--vault", vault, cwd=tmp_path)
    (vault / "my-skill" / "main.py").write_text("# edited by hand\n", encoding="utf-8")
    before = snapshot(vault)
    run = skillq("new", "my-skill", "--vault", vault, cwd=tmp_path, expect=2)
    assert "already exists" in run.stderr
    assert snapshot(vault) == before
    for bad in ("My_Skill", "-lead", "../escape"):
        run = skillq("new", "--vault", vault, "--", bad, cwd=tmp_path, expect=2)
        assert "not a valid skill name" in run.stderr, bad
    assert sorted(p.name for p in tmp_path.iterdir()) == ["vault"]
    assert snapshot(vault) == before
    assert [p.name for p in vault.iterdir()] == ["my-skill"]  # no staging folder left


def test_new_orchestrator(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    skillq("new", "my-skill", "--vault", vault, cwd=tmp_path)  # the scaffolded leaf
    write_skill(vault, "other-skill", "name: other-skill\ndescription: Does more. Use it in "
                "tests.\ninputs:\n  - name: text\n    type: string\n    required: true\n")
    skillq("new", "pipe", "--orchestrator", "--step", "my-skill", "--vault", vault, cwd=tmp_path)
    skillq("new", "pipe2", "--orchestrator", "--step", "my-skill", "--step", "other-skill",
           "--vault", vault, cwd=tmp_path)
    assert "✓ 4 skill(s) valid" in skillq("validate", vault, cwd=tmp_path).stdout
    loaded = load_vault(vault)
    for name, callees in (("pipe", ["my-skill"]), ("pipe2", ["my-skill", "other-skill"])):
        skill = loaded.skills[name]
        assert skill.manifest.kind == "orchestrator"
        assert [s.skill_name for s in skill.manifest.steps or ()] == callees
        assert skill.sub_skills and list(skill.sub_skills.names) == callees
        for file in ("SKILL.md", "plan.md", "benchmarks.json", "sub-skills.json"):
            assert (skill.folder / file).is_file()


def test_new_orchestrator_calling_a_skill_twice_lists_it_once(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    write_skill(vault, "helper", "name: helper\ndescription: Helps. Use it twice.\n")
    skillq("new", "pipe", "--orchestrator", "--step", "helper", "--step", "helper",
           "--vault", vault, cwd=tmp_path)
    skill = load_vault(vault).skills["pipe"]
    assert [s.skill_name for s in skill.manifest.steps or ()] == ["helper", "helper"]
    assert skill.sub_skills and list(skill.sub_skills.names) == ["helper"]


def test_new_usage_errors(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    write_skill(vault, "my-skill", "name: my-skill\ndescription: Does it. Use it in tests.\n")
    before = snapshot(vault)
    run = skillq("new", "pipe", "--orchestrator", "--vault", vault, cwd=tmp_path, expect=2)
    assert "--step" in run.stderr
    skillq("new", "pipe", "--step", "my-skill", "--vault", vault, cwd=tmp_path, expect=2)
    run = skillq("new", "pipe", "--orchestrator", "--step", "my-skil", "--vault", vault,
                 cwd=tmp_path, expect=2)
    assert "did you mean 'my-skill'" in run.stderr
    skillq("new", "x", "--vault", tmp_path / "missing", cwd=tmp_path, expect=2)
    assert snapshot(vault) == before
    assert not (tmp_path / "missing").exists()


# -------------------------------------------------------------------------------- export


def test_export_round_trip(example: Example, tmp_path: Path) -> None:
    """The whole vault to the Agent Skills form and back to bot0, manifests unchanged."""
    original = example.load()
    agentskills, bot0 = tmp_path / "agentskills", tmp_path / "bot0"
    skillq("export", "--agentskills", agentskills, "--vault", example.path, cwd=tmp_path)

    # Every exported folder passes the reference validator ...
    folders = folders_of(agentskills)
    assert [f.name for f in folders] == sorted(original.skills)
    failed = {n: r.output for n, r in reference(folders).items() if r.code != 0}
    assert not failed, failed
    # ... which does reject the originals that hold execution fields (the control).
    controls = [s.folder for s in original.skills.values()
                if s.form is SkillForm.BOT0 and has_execution_fields(s)]
    assert controls, "no bot0 skill with execution fields: the export test proves nothing"
    passed = [n for n, r in reference(controls).items() if r.code == 0]
    assert not passed, f"the reference validator accepted bot0 folders {passed}"
    for name in original.skills:  # SKILL.md holds only the spec fields
        front = (agentskills / name / "SKILL.md").read_text(encoding="utf-8")
        keys = re.findall(r"^([A-Za-z_-]+):", front.split("\n---\n")[0], re.M)
        assert set(keys) <= SPEC_FIELDS, (name, keys)

    # The exported vault is a valid vault with the same skills and manifests.
    run = skillq("validate", agentskills, cwd=tmp_path)
    assert f"{len(original.skills)} skill(s) valid" in run.stdout
    assert_same_skills(original, load_vault(agentskills), {
        n: SkillForm.AGENTSKILLS if has_execution_fields(s) else SkillForm.PLAIN
        for n, s in original.skills.items()})

    # Back to the bot0 form: still the same.
    skillq("export", "--bot0", bot0, "--vault", agentskills, cwd=tmp_path)
    skillq("validate", bot0, cwd=tmp_path)
    assert_same_skills(original, load_vault(bot0), {
        n: SkillForm.BOT0 if has_execution_fields(s) else SkillForm.PLAIN
        for n, s in original.skills.items()})
    assert not any(bot0.rglob("skill.yaml"))

    # Exporting into a target that exists fails and leaves it as it was.
    before = snapshot(agentskills)
    run = skillq("export", "--agentskills", agentskills, "--vault", example.path,
                 cwd=tmp_path, expect=None)
    assert run.code != 0 and "already exists" in run.stderr
    run = skillq("export", example.orchestrator, "--bot0", agentskills, "--vault",
                 example.path, cwd=tmp_path, expect=None)
    assert run.code != 0 and "already exists" in run.stderr
    assert snapshot(agentskills) == before
    assert not [p for p in agentskills.iterdir() if p.name.startswith(".")]


def test_export_one_skill(example: Example, tmp_path: Path) -> None:
    vault = example.load()
    name, out = example.orchestrator, tmp_path / "out"
    run = skillq("export", name, "--agentskills", out, "--vault", example.path, cwd=tmp_path)
    assert name in run.stdout
    assert [p.name for p in out.iterdir()] == [name]
    assert reference([out / name])[name].code == 0
    copy = load_vault(out).skills[name]  # alone in OUT, without its callees
    assert copy.manifest == vault.skills[name].manifest
    assert written_fields(copy.manifest) == written_fields(vault.skills[name].manifest)
    assert copy.form is SkillForm.AGENTSKILLS and (out / name / "skill.yaml").is_file()


def test_failed_export_writes_nothing(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    for name in ("alpha", "omega"):
        write_skill(vault, name, f"name: {name}\ndescription: Does {name}. Use it in tests.\n")
    out = tmp_path / "out"
    (out / "omega").mkdir(parents=True)
    run = skillq("export", "--agentskills", out, "--vault", vault, cwd=tmp_path, expect=None)
    assert run.code != 0 and "already exists" in run.stderr
    assert [p.name for p in out.iterdir()] == ["omega"]


def test_export_keeps_nested_files_named_like_manifests(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    folder = write_skill(vault, "helper", "name: helper\ndescription: Helps. Use it in tests.\n")
    (folder / "assets" / "example").mkdir(parents=True)
    (folder / "assets" / "example" / "SKILL.md").write_text(
        "---\nname: example\ndescription: A bundled template.\n---\n", encoding="utf-8")
    (folder / "assets" / "skill.yaml").write_text("kept: true\n", encoding="utf-8")
    skillq("export", "--bot0", tmp_path / "out", "--vault", vault, cwd=tmp_path)
    copied = snapshot(tmp_path / "out" / "helper")
    assert {"assets/example/SKILL.md", "assets/skill.yaml"} <= set(copied)


def test_export_into_a_file_is_an_error_not_a_traceback(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    write_skill(vault, "helper", "name: helper\ndescription: Helps. Use it in tests.\n")
    (tmp_path / "afile").write_text("keep me\n", encoding="utf-8")
    run = skillq("export", "--agentskills", tmp_path / "afile", "--vault", vault,
                 cwd=tmp_path, expect=None)
    assert run.code != 0 and "afile" in run.stderr
    assert (tmp_path / "afile").read_text(encoding="utf-8") == "keep me\n"


DASHED = {
    "dash-inline": json.dumps("Split a file on --- markers. Use it when a document has ---."),
    "dash-edges": json.dumps("--- Leading and trailing dashes, a---b and ------ too ---"),
    "dash-quoted": json.dumps('Say "---": a # is text here. Use it when: always, ---.'),
    "dash-lines": "|-\n  First line. Use it when lines hold dashes.\n  ---\n  Last --- line.",
}


def test_description_with_dashes_survives_the_agentskills_export(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    for name, description in DASHED.items():
        folder = write_skill(vault, name, (
            f"name: {name}\ndescription: {description}\n"
            'license: "MIT --- see LICENSE"\ncompatibility: "Python 3.11 --- no network"\n'
            "version: 2\napproach: code\ninputs:\n  - name: text\n    type: string\n"
            "    required: true\noutputs:\n  - name: result\n    type: string\n"
            "run:\n  command: python3 main.py\n"), body="Upper-case the text.\n\n---\n\nDone.\n")
        (folder / "main.py").write_text("print('{\"result\": \"\"}')\n", encoding="utf-8")
    original = load_vault(vault)
    assert not original.problems and set(original.skills) == set(DASHED)
    assert "\n---\n" in original.skills["dash-lines"].manifest.description

    out, back = tmp_path / "agentskills", tmp_path / "bot0"
    skillq("export", "--agentskills", out, "--vault", vault, cwd=tmp_path)
    failed = {n: r.output for n, r in reference(folders_of(out)).items() if r.code != 0}
    assert not failed
    for name, skill in original.skills.items():
        props = reference_properties(out / name)
        assert props["description"] == skill.manifest.description, name
        assert props["license"] == skill.manifest.license, name
        assert props["compatibility"] == skill.manifest.compatibility, name
    for copy, form in ((out, SkillForm.AGENTSKILLS), (back, SkillForm.BOT0)):
        if copy == back:
            skillq("export", "--bot0", back, "--vault", out, cwd=tmp_path)
        loaded = load_vault(copy)
        assert not loaded.problems, loaded.problems
        assert_same_skills(original, loaded, dict.fromkeys(DASHED, form))


def test_export_usage_errors(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    write_skill(vault, "good", "name: good\ndescription: Does good. Use it in tests.\n")
    run = skillq("export", "--vault", vault, cwd=tmp_path, expect=2)
    assert "exactly one" in run.stderr
    skillq("export", "--agentskills", tmp_path / "a", "--bot0", tmp_path / "b", "--vault", vault,
           cwd=tmp_path, expect=2)
    run = skillq("export", "godo", "--agentskills", tmp_path / "a", "--vault", vault,
                 cwd=tmp_path, expect=2)
    assert "did you mean 'good'" in run.stderr
    # An unknown field is an error beside skillq's fields (in a plain folder, a warning).
    write_skill(vault, "bad", "name: bad\ndescription: Broken. Use it never.\n"
                "approach: agent\ncolour: red\n")
    run = skillq("export", "--agentskills", tmp_path / "a", "--vault", vault, cwd=tmp_path,
                 expect=1)
    assert "colour" in run.stderr
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


# ---------------------------------------------------------------------------------- sync


def test_sync_regenerates_sub_skills_and_keeps_roles(example: Example, tmp_path: Path) -> None:
    vault = tmp_path / example.name
    shutil.copytree(example.path, vault, ignore=shutil.ignore_patterns("__pycache__"))
    path = vault / example.orchestrator / "sub-skills.json"
    entries = json.loads(path.read_text(encoding="utf-8"))["sub_skills"]
    roles = {e["skill_id"]: e["role"] for e in entries}
    dropped, doubled = entries[0]["skill_id"], entries[-1]["skill_id"]
    assert dropped != doubled
    path.write_text(json.dumps({"sub_skills": [*entries[1:], entries[-1]]}, indent=2),
                    encoding="utf-8")

    run = skillq("validate", vault, cwd=tmp_path, expect=1)
    assert f"misses '{dropped}'" in run.stdout and f"skillq sync {example.orchestrator}" \
        in run.stdout
    assert f"lists '{doubled}' twice" in run.stdout
    skillq("sync", example.orchestrator, "--vault", vault, cwd=tmp_path)
    skillq("validate", vault, cwd=tmp_path)

    regenerated = json.loads(path.read_text(encoding="utf-8"))["sub_skills"]
    steps = load_vault(vault).skills[example.orchestrator].manifest.steps or ()
    assert [e["skill_id"] for e in regenerated] == list(dict.fromkeys(s.skill_name
                                                                      for s in steps))
    for entry in regenerated:
        if entry["skill_id"] != dropped:
            assert entry["role"] == roles[entry["skill_id"]]
        assert entry["role"].strip()


def test_sync_errors(workdir: Path) -> None:
    example = GIT_DIGEST
    leaf = next(n for n, s in sorted(example.load().skills.items()) if not s.manifest.steps)
    run = skillq("sync", leaf, "--vault", example.path, cwd=workdir, expect=2)
    assert "has no steps" in run.stderr
    skillq("sync", "nope", "--vault", example.path, cwd=workdir, expect=2)


# ----------------------------------------------------------- the anthropics/skills layout


def test_anthropic_layout_validates_unchanged(tmp_path: Path) -> None:
    before = snapshot(ANTHROPIC)
    count = len(folders_of(ANTHROPIC))
    assert count >= 5
    run = skillq("validate", ANTHROPIC, cwd=tmp_path)
    assert f"✓ {count} skill(s) valid (skillq rules)" in run.stdout
    run = skillq("validate", "--spec", "agentskills", ANTHROPIC, cwd=tmp_path)
    assert f"✓ {count} skill(s) valid (agentskills rules)" in run.stdout
    catalog = skillq("catalog", "--vault", ANTHROPIC, cwd=tmp_path).stdout
    assert len(catalog.splitlines()) == count
    out = skillq("show", "skill-creator", "--vault", ANTHROPIC, cwd=tmp_path, columns=WIDE)
    assert "instructions" in out.stdout and "agent" in out.stdout
    assert snapshot(ANTHROPIC) == before
    assert not list(ANTHROPIC.rglob("__pycache__"))


def test_anthropic_layout_loads_as_instruction_skills() -> None:
    vault = load_vault(ANTHROPIC)
    assert not vault.problems
    assert sorted(vault.skills) == [f.name for f in folders_of(ANTHROPIC)]
    subfolders = set()
    for name, skill in vault.skills.items():
        m = skill.manifest
        assert m.kind == "instructions", name
        assert m.effective_approach is Approach.AGENT, name
        assert skill.form is SkillForm.PLAIN, name
        assert set(written_fields(m)) <= SPEC_FIELDS, name
        assert m.license and "LICENSE.txt" in m.license, name
        assert (skill.folder / "LICENSE.txt").is_file(), name
        assert skill.benchmarks is None and skill.sub_skills is None
        subfolders |= {p.name for p in skill.folder.iterdir() if p.is_dir()}
        props = reference_properties(skill.folder)  # the reference reads the same text
        assert props["name"] == name
        assert props["description"] == m.description, name
        assert props["license"] == m.license, name
    assert {"scripts", "references", "assets"} <= subfolders
    multi_line = [n for n in vault.skills
                  if "\n  " in (ANTHROPIC / n / "SKILL.md").read_text(encoding="utf-8")
                  .split("\n---\n")[0]]
    assert multi_line, "no multi-line description in the fixture"


def test_anthropic_layout_passes_the_reference_validator() -> None:
    results = reference(folders_of(ANTHROPIC))
    assert len(results) >= 5
    assert not {n: r.output for n, r in results.items() if r.code != 0}


# --------------------------------------------------------------------- other error paths


def test_vault_errors(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    for args in (("list", "--vault", missing), ("validate", missing)):
        run = skillq(*args, cwd=tmp_path, expect=2)
        assert "does not exist" in run.stderr, args
    afile = tmp_path / "afile"
    afile.write_text("not a vault\n", encoding="utf-8")
    run = skillq("list", "--vault", afile, cwd=tmp_path, expect=2)
    assert "not a folder" in run.stderr
    skillq("frobnicate", cwd=tmp_path, expect=2)


def test_validate_reports_every_problem_and_exits_1(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    write_skill(vault, "good", "name: good\ndescription: Does good. Use it in tests.\n")
    write_skill(vault, "bad", "name: bad\ndescription: Broken. Use it never.\ncolour: red\n"
                "approach: code\n")
    (vault / "empty").mkdir()
    run = skillq("validate", vault, cwd=tmp_path, expect=1)
    problems = [line for line in run.stdout.splitlines() if line.startswith("vault/")]
    assert any("bad/SKILL.md" in p and "colour" in p for p in problems), run.stdout
    assert any("bad/SKILL.md" in p and "approach" in p for p in problems), run.stdout
    assert any(p.startswith("vault/empty") and "SKILL.md" in p for p in problems), run.stdout
    assert all(re.match(r"^\S+: \S+: .+", p) for p in problems), problems
    skillq("validate", vault / "good", cwd=tmp_path)  # one good folder of a bad vault
    run = skillq("list", "--vault", vault, cwd=tmp_path, columns=WIDE)
    assert "good" in run.stdout and "problem(s)" in run.stderr
