"""Shared fixtures: repository paths, the round-number test profile, tiny workload writers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from sim.hardware import Hardware, load_profile

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
TEST_PROFILE = FIXTURES / "profiles" / "testgpu.yaml"


@pytest.fixture(scope="session")
def testgpu() -> Hardware:
    return load_profile(str(TEST_PROFILE))


@pytest.fixture(scope="session")
def h200() -> Hardware:
    return load_profile("h200-sxm")


def workload_doc(ops: list[dict[str, Any]], tensors: dict[str, Any], params: dict[str, Any] | None = None,
                 buckets: list[dict[str, Any]] | None = None, mode: str = "eager") -> dict[str, Any]:
    params = params or {"n": 1}
    return {
        "schema": "kernelsim.workload/v1",
        "name": "test",
        "kind": "training",
        "mode": mode,
        "parameters": params,
        "distribution": {"buckets": buckets or [{"params": dict(params), "weight": 1.0}]},
        "tensors": tensors,
        "ops": ops,
    }


def write_yaml(path: Path, doc: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path
