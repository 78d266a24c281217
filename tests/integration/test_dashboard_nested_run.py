"""A nested run's page links to the run it belongs to (the dashboard reads the parent's
run id from its step attempt's id, shared/attempt_id.py)."""

from __future__ import annotations

import shutil
import urllib.request
from pathlib import Path

import pytest
from conftest import VAULTS, Stack
from sqlalchemy import select
from test_dashboard import serve

from shared.db.models import PipelineRun

pytestmark = pytest.mark.integration

OUTER = """---
name: outer
description: "Call whole, an orchestrator. Use it to test a nested run's page."
version: 1
inputs:
  - name: text
    type: string
    required: true
    description: "The text."
outputs:
  - name: text
    type: string
    description: From whole.
    from: ${steps.inner.outputs.text}
steps:
  - id: inner
    skill: whole
    with:
      text: ${inputs.text}
---

# outer

Runs whole as a nested run.
"""


def test_a_nested_run_links_to_its_parent_run(stack: Stack, tmp_path: Path) -> None:
    stack.ensure_standard_workers()
    vault = tmp_path / "vault"
    for name in ("part", "whole"):
        shutil.copytree(VAULTS / "dashboard" / name, vault / name)
    (vault / "outer").mkdir()
    (vault / "outer" / "SKILL.md").write_text(OUTER)
    done = stack.cli("run", "outer", "--input", "text=hi", "--vault", str(vault), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    with stack.db() as session:
        outer = session.scalars(select(PipelineRun).where(PipelineRun.skill == "outer")
                                .order_by(PipelineRun.created_at.desc())).first()
        assert outer is not None
        nested = session.scalars(select(PipelineRun).where(
            PipelineRun.parent_step_run_id.like(f"{outer.id}/%"))).one()
        outer_id, nested_id = outer.id, nested.id
    served = serve(stack, vault)
    try:
        with urllib.request.urlopen(f"{served.url}/runs/{nested_id}", timeout=30) as page:
            html = page.read().decode()
    finally:
        served.stop()
    assert f'nested run of step <a href="/runs/{outer_id}">' in html, html[:2000]
