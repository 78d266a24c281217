"""Reading a run-end notice (lifecycle/run_end_notice.py): its run, and the record it
carries only when the row matches this client's model."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from lifecycle.run_end_notice import record_of, run_of
from shared.db.models import PipelineRun

COLUMNS = [c.name for c in PipelineRun.__table__.columns]


def row(**changed: object) -> dict[str, object]:
    found: dict[str, object] = dict.fromkeys(COLUMNS)
    found.update(id="r1", skill="s", version=1, state="succeeded", source="production",
                 vault="/v", plan={"steps": []}, inputs={"a": 1}, input_hash="h",
                 outputs={"b": [1, "x"]}, progress={},
                 created_at="2026-12-03T20:12:02.5+00:00",
                 finished_at="2026-12-03T21:12:02.123456+01:00")
    found.update(changed)
    return found


def test_the_run_is_the_first_line() -> None:
    assert run_of("r1") == "r1"
    assert run_of("r1\n{}") == "r1"


def test_a_notice_s_row_becomes_the_record_in_the_reader_s_time_zone() -> None:
    paris = ZoneInfo("Europe/Paris")
    record = record_of("r1\n" + json.dumps(row()), paris)
    assert record is not None
    assert record.id == "r1" and record.outputs == {"b": [1, "x"]} and record.plan == {
        "steps": []}
    assert record.created_at == datetime(2026, 12, 3, 20, 12, 2, 500000, tzinfo=UTC)
    assert record.created_at.tzinfo is paris
    assert record.finished_at == datetime(2026, 12, 3, 20, 12, 2, 123456, tzinfo=UTC)
    assert record.started_at is None


def test_no_row_or_another_schema_s_row_is_read_instead() -> None:
    assert record_of("r1", UTC) is None
    assert record_of("r1\nnot json", UTC) is None
    assert record_of("r1\n" + json.dumps({**row(), "added_later": 1}), UTC) is None
    shorter = row()
    del shorter["retry_of"]
    assert record_of("r1\n" + json.dumps(shorter), UTC) is None
