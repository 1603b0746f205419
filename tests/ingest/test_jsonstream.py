"""The streaming reader gives exactly what json.load gives, for any chunk size, plain or gzip,
and names what is wrong in a malformed file."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from sim.errors import InputError
from sim.ingest import jsonstream
from sim.ingest.jsonstream import iter_events


@pytest.mark.parametrize("chunk", [1, 7, 64, 1 << 20])
def test_same_events_as_json_load(synth_plain: Path, chunk: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jsonstream, "CHUNK_CHARS", chunk)
    meta: dict[str, object] = {}
    events = list(iter_events(synth_plain, meta))
    doc = json.loads(synth_plain.read_text())
    assert events == doc["traceEvents"]
    assert meta["traceName"] == "synthetic" and meta["schemaVersion"] == 1


def test_gzip_is_read_transparently(synth_gz: Path) -> None:
    with gzip.open(synth_gz, "rt") as fh:
        doc = json.load(fh)
    assert list(iter_events(synth_gz)) == doc["traceEvents"]


def test_numbers_split_across_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jsonstream, "CHUNK_CHARS", 3)
    p = tmp_path / "t.json"
    p.write_text('{"a": 123456789, "traceEvents": [{"ts": 1234567.125}, {"ts": 2}], "z": -0.5}')
    meta: dict[str, object] = {}
    assert list(iter_events(p, meta)) == [{"ts": 1234567.125}, {"ts": 2}]
    assert meta == {"a": 123456789, "z": -0.5}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty file"),
        ("[]", "bare JSON array"),
        ('{"traceEvents": [{"ph": "X"}', "truncated file"),
        ('{"traceEvents": [{"ph": "X", "name": "ab', "traceEvents[0]"),
        ('{"traceEvents": [1]}', "traceEvents[0]"),
        ('{"other": 1}', "no 'traceEvents' array"),
        ('{"traceEvents": []} extra', "unexpected text"),
    ],
)
def test_malformed_json_is_named(tmp_path: Path, text: str, message: str) -> None:
    p = tmp_path / "bad.json"
    p.write_text(text)
    with pytest.raises(InputError, match=message.replace("[", r"\[").replace("]", r"\]")):
        list(iter_events(p))


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="file not found"):
        list(iter_events(tmp_path / "nope.json"))
