"""Archive rows: every archived table's row survives JSON and back, and artifact keys are
found wherever a row holds one."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from orchestrator.archive.tables import TABLES, artifact_keys, decode_row, encode_row
from shared.db.models import Artifact, StepRun

KEY = "sha256:" + "ab" * 32


def test_a_row_survives_json_and_back() -> None:
    when = datetime(2026, 11, 30, 5, 40, 1, 123456, tzinfo=UTC)
    table = Artifact.__table__
    row = {"key": KEY, "size": 3, "media_type": "application/json", "content": b"\x00\xff{",
           "created_at": when}
    line = json.dumps(encode_row(table, row))
    assert decode_row(table, json.loads(line)) == row


def test_step_rows_keep_json_values_and_nulls() -> None:
    table = StepRun.__table__
    row = {c.key: None for c in table.columns}
    row.update(id="run-1/s/-1/1", outputs={"$ref": KEY}, inputs={"a": [1, 2.5, None]})
    assert decode_row(table, json.loads(json.dumps(encode_row(table, row)))) == row


def test_artifact_keys_are_found_at_any_depth() -> None:
    other = "sha256:" + "cd" * 32
    value = {"outputs": {"$ref": KEY}, "files": {"a.py": other}, "list": [[KEY]],
             "not": "sha256:short", "text": f"mentions {KEY} inside"}
    assert sorted(set(artifact_keys(value))) == sorted({KEY, other})


def test_artifacts_are_exported_last_and_runs_before_their_steps() -> None:
    names = [spec.name for spec in TABLES]
    assert names[-1] == "artifacts"
    assert names.index("pipeline_runs") < names.index("step_runs")
