"""The vault: a flat folder of skills, loaded once and checked as a whole.

Discovery is cached per folder for a few seconds (5 s, as in the bot0 design) so a
worker or the dashboard asking many times in a burst reads the disk once.
"""

from __future__ import annotations

import difflib
import functools
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from shared.builtin import RESERVED
from shared.checks import check_skill
from shared.errors import SkillNotFound, VaultError
from shared.pipeline_checks import check_pipeline, check_sub_skill_cycles, check_sub_skills_file
from shared.problems import Problem, display_base, display_path
from shared.skill import SIDECAR, Skill, is_skill_folder, load_skill

DISCOVERY_TTL_S = 5.0
_IGNORED = {"__pycache__", "node_modules"}


@dataclass(frozen=True)
class Vault:
    root: Path
    skills: Mapping[str, Skill]
    problems: tuple[Problem, ...]
    folders: tuple[Path, ...]
    cycles: Mapping[Problem, frozenset[str]] = field(default_factory=dict)
    # Fields skillq keeps but ignores (shared/kept_fields.py): reported, never a problem.
    warnings: tuple[Problem, ...] = ()

    def get(self, name: str) -> Skill:
        name = name.removeprefix("/")  # a /slug token names the same skill
        skill = self.skills.get(name)
        if skill is None:
            close = difflib.get_close_matches(name, list(self.skills), n=1)
            raise SkillNotFound(name, display_path(self.root), close[0] if close else None)
        return skill

    def problems_in(self, folder: Path) -> list[Problem]:
        """Problems of one skill folder (its files), including cycles that pass through it."""
        prefix = display_path(folder)
        return [p for p in self.problems
                if p.path == prefix or p.path.startswith(prefix.rstrip("/") + "/")
                or folder.name in self.cycles.get(p, ())]

    def warnings_in(self, folder: Path) -> list[Problem]:
        prefix = display_path(folder)
        return [w for w in self.warnings
                if w.path == prefix or w.path.startswith(prefix.rstrip("/") + "/")]

    @property
    def valid(self) -> bool:
        return not self.problems


@functools.lru_cache(maxsize=64)
def resolved_root(root: Path) -> Path:
    """A vault's absolute path, resolved once per process: runs record it and a client's
    context carries it, and resolving costs a lstat per path component at every launch."""
    return root.resolve()


def skill_folders(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir()
                  if p.is_dir() and not p.name.startswith(".") and p.name not in _IGNORED)


def load_vault(root: Path, *, strict: bool = False) -> Vault:
    """Read and check every skill under ``root`` (no cache; see open_vault); ``strict``
    refuses the fields skillq would keep without using (`skillq validate --strict`)."""
    if not root.exists():
        raise VaultError(f"vault {display_path(root)} does not exist; pass --vault PATH or set "
                         "SKILLQ_VAULT")
    if not root.is_dir():
        raise VaultError(f"vault {display_path(root)} is not a folder")
    problems: list[Problem] = []
    warnings: list[Problem] = []
    skills: dict[str, Skill] = {}
    broken: set[str] = set()
    folders = skill_folders(root)
    for folder in folders:
        skill, found = load_skill(folder, strict=strict)
        problems.extend(found)
        if skill is None:
            broken.add(folder.name)
        elif skill.name in skills:
            problems.append(skill.problem(("name",), f"'{skill.name}' is already the name of "
                                          f"{display_path(skills[skill.name].folder)}"))
        else:
            skills[skill.name] = skill
            warnings.extend(skill.warnings)
            problems.extend(check_skill(skill))
            if skill.name in RESERVED:
                problems.append(skill.problem(("name",), f"'{skill.name}' is the name of a "
                                              "skill skillq ships (shared/builtin/); rename "
                                              "this skill and its folder"))
    for skill in skills.values():
        problems.extend(check_pipeline(skill, skills, broken))
        problems.extend(check_sub_skills_file(skill, skills, broken))
    cycles = dict(check_sub_skill_cycles(skills))
    problems.extend(cycles)
    return Vault(root, skills, tuple(sorted(set(problems), key=Problem.sort_key)),
                 tuple(folders), cycles, tuple(sorted(warnings, key=Problem.sort_key)))


# By folder and by where its problems' paths are shown from (they are rendered at load).
_cache: dict[tuple[Path, str], tuple[float, Vault]] = {}
_lock = threading.Lock()


def open_vault(root: Path, *, ttl_s: float = DISCOVERY_TTL_S) -> Vault:
    """The vault at ``root``, reused for ``ttl_s`` seconds after it was read."""
    key = (root.resolve(), display_base())
    now = time.monotonic()
    with _lock:
        hit = _cache.get(key)
        if hit is not None and now - hit[0] < ttl_s:
            return hit[1]
    vault = load_vault(root)
    with _lock:
        _cache[key] = (now, vault)
    return vault


def forget_vaults() -> None:
    """Drop the discovery cache (after writing skill files, so the next read sees them)."""
    with _lock:
        _cache.clear()
        _skills.clear()


_skills: dict[Path, tuple[tuple[int, ...], Skill]] = {}


def _manifest_stamp(folder: Path) -> tuple[int, ...] | None:
    stamp: list[int] = []
    for name in ("SKILL.md", "skill.md", SIDECAR):
        try:
            st = (folder / name).stat()
        except OSError:
            stamp += [0, 0]
            continue
        stamp += [st.st_mtime_ns, st.st_size]
    return tuple(stamp) if any(stamp) else None


def open_skill(root: Path, name: str) -> Skill | None:
    """One skill of the vault at ``root`` (the folder named after it), re-read only when its
    manifest changed: a worker runs one skill per step and must not re-check the whole
    vault for it, yet sees an edit on the next step."""
    folder = root / name
    stamp = _manifest_stamp(folder)
    if stamp is None:
        return None
    with _lock:
        hit = _skills.get(folder)
        if hit is not None and hit[0] == stamp:
            return hit[1]
    skill, _ = load_skill(folder)
    if skill is None or skill.name != name:
        return None
    with _lock:
        _skills[folder] = (stamp, skill)
    return skill


def vault_of(path: Path) -> tuple[Path, Path | None]:
    """(vault root, skill folder or None) for a path that is a vault or one skill in it."""
    path = path.resolve() if path.exists() else path
    if path.is_file() and path.name.lower() == "skill.md":
        path = path.parent
    if path.is_dir() and is_skill_folder(path):
        return path.parent, path
    return path, None
