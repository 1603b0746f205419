"""Shared fixtures for the trace importer: a small synthetic Kineto trace (plain and gzip)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sim.ingest.synthetic import write_synthetic_trace
from tests.conftest import FIXTURES

MALFORMED = FIXTURES / "malformed_traces"
REAL_TRACES = sorted((FIXTURES / "traces").glob("*.json.gz"))


@pytest.fixture(scope="session")
def synth_gz(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_synthetic_trace(tmp_path_factory.mktemp("traces") / "synth.json.gz", steps=3, layers=2)


@pytest.fixture(scope="session")
def synth_plain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_synthetic_trace(tmp_path_factory.mktemp("traces") / "synth.json", steps=2, layers=1)
