"""The cap on one run input's size (shared/inputs.py, SKILLQ_INPUT_MAX_BYTES): what
`skillq run`, `skillq schedule add` and the dashboard's run form all parse through.
(Through the real CLI and dashboard: tests/integration/test_dashboard_guard.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shared.errors import InputError
from shared.inputs import parse_cli_inputs, value_bytes
from shared.manifest import Manifest

CAP = 100


@pytest.fixture(scope="module")
def manifest() -> Manifest:
    return Manifest.model_validate({
        "name": "digest", "description": "Digest some pages. Use it for tests.",
        "inputs": [{"name": "title", "type": "string", "required": True},
                   {"name": "urls", "type": "string[]"},
                   {"name": "opts", "type": "object"}]})


def problems(manifest: Manifest, pairs: list[str], inputs_file: Path | None = None,
             max_bytes: int | None = CAP) -> list[str]:
    with pytest.raises(InputError) as info:
        parse_cli_inputs(manifest, pairs, inputs_file, max_bytes=max_bytes)
    return [str(p) for p in info.value.problems]


def test_sizes_are_utf8_bytes_and_compact_json() -> None:
    assert value_bytes("é" * 10) == 20
    assert value_bytes({"a": [1, 2]}) == len('{"a":[1,2]}')
    assert value_bytes(["é"]) == len('["é"]'.encode())


def test_a_value_at_the_cap_fits_and_one_byte_more_is_refused_naming_the_fix(
        manifest: Manifest) -> None:
    assert parse_cli_inputs(manifest, ["title=" + "x" * CAP], max_bytes=CAP)["title"] == \
        "x" * CAP
    assert problems(manifest, ["title=" + "é" * 51]) == [
        "--input: title: is 102 bytes, over the 100-byte cap on one input value: give less, "
        "or raise SKILLQ_INPUT_MAX_BYTES"]


def test_an_inputs_file_value_is_capped_under_the_files_name(manifest: Manifest,
                                                             tmp_path: Path) -> None:
    path = tmp_path / "in.json"
    path.write_text(json.dumps({"title": "T", "opts": {"k": "v" * CAP}}), encoding="utf-8")
    [line] = problems(manifest, [], path)
    assert line.endswith(f"in.json: opts: is {CAP + 8} bytes, over the 100-byte cap on one "
                         "input value: give less, or raise SKILLQ_INPUT_MAX_BYTES"), line


def test_repeats_of_an_array_input_are_capped_together(manifest: Manifest) -> None:
    pairs = ["title=T", *(f"urls={'u' * 40}" for _ in range(3))]
    assert [line.split(": ")[1] for line in problems(manifest, pairs)] == ["urls"]
    assert len(parse_cli_inputs(manifest, pairs[:3], max_bytes=CAP)["urls"]) == 2


def test_every_oversized_input_is_named_and_a_huge_bad_pair_is_not_echoed(
        manifest: Manifest) -> None:
    found = problems(manifest, ["title=" + "t" * 200, "opts=" + "o" * 200, "x" * 5000])
    assert [line.split(": ")[1] for line in found] == ["title", "opts", "x" * 77 + "..."]


def test_the_cap_defaults_to_the_setting(manifest: Manifest,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKILLQ_INPUT_MAX_BYTES", "8")
    assert parse_cli_inputs(manifest, ["title=12345678"])["title"] == "12345678"
    assert "over the 8-byte cap" in problems(manifest, ["title=123456789"], max_bytes=None)[0]
