"""Loaded by every Python process started with this folder on PYTHONPATH (path_cpu.py
puts it there for the stack it starts): the functions named in PATHCPU_FUNCS
("module:Qual.name,...") log their entry and exit, wall clock and this thread's CPU, to
PATHCPU_DIR/<pid>.log. A module is patched as it is imported, so callers that import a
function by name get the logging one. Costs a few microseconds a call."""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import os
import sys
import time
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

_DIR = os.environ.get("PATHCPU_DIR", "")
_WANTED: dict[str, list[str]] = {}
for _name in filter(None, os.environ.get("PATHCPU_FUNCS", "").split(",")):
    _module, _, _qual = _name.partition(":")
    _WANTED.setdefault(_module, []).append(_qual)
_fd: list[int] = []  # this process's log, opened on first use (a fork gets its own)


def _log(mark: str, name: str) -> None:
    if not _fd:
        _fd.append(os.open(f"{_DIR}/{os.getpid()}.log",
                           os.O_WRONLY | os.O_CREAT | os.O_APPEND))
    os.write(_fd[0], f"{time.time():.6f} {time.thread_time() * 1000:.4f} {mark} {name}\n"
             .encode())


def _logged(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        _log(">", name)
        try:
            return fn(*args, **kwargs)
        finally:
            _log("<", name)
    return call


def _patch(module: ModuleType) -> None:
    for qual in _WANTED.get(module.__name__, []):
        owner: Any = module
        *path, attr = qual.split(".")
        for part in path:
            owner = getattr(owner, part)
        found = owner.__dict__.get(attr) if isinstance(owner, type) else getattr(owner, attr,
                                                                                 None)
        if callable(found):
            setattr(owner, attr, _logged(found, f"{module.__name__}:{qual}"))


class _Loader(importlib.abc.Loader):
    def __init__(self, inner: importlib.abc.Loader) -> None:
        self.inner = inner

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.inner.exec_module(module)
        _patch(module)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if name not in _WANTED:
            return None
        for finder in sys.meta_path:
            if finder is not self and hasattr(finder, "find_spec"):
                spec = finder.find_spec(name, path, target)
                if spec is not None and spec.loader is not None:
                    spec.loader = _Loader(spec.loader)
                    return spec
        return None


if _DIR and _WANTED:  # at start-up, before any of the named modules is imported
    sys.meta_path.insert(0, _Finder())
