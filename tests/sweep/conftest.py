"""A tiny sweepable scenario: two fusable elementwise ops, a block-size knob, two buckets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import workload_doc, write_yaml


def tiny_scenario(tmp_path: Path, sweep: dict[str, Any] | None = None, **extra: Any) -> Path:
    wl = workload_doc(
        ops=[
            {"name": "a", "kind": "elementwise", "reads": ["x"], "writes": ["y"], "math": {"add": 1}},
            {"name": "b", "kind": "elementwise", "reads": ["y"], "writes": ["z"], "math": {"gelu": 1}},
        ],
        tensors={t: {"shape": ["n"], "dtype": "bf16"} for t in ("x", "y", "z")},
        params={"n": 4096},
        buckets=[{"params": {"n": 1 << 16}, "weight": 3}, {"params": {"n": 1 << 20}, "weight": 1}],
    )
    write_yaml(tmp_path / "wl.yaml", wl)
    doc: dict[str, Any] = {
        "schema": "kernelsim.scenario/v1",
        "name": "tiny_sweep",
        "workload": "wl.yaml",
        "hardware": ["h200-sxm"],
        "parameters": {"bs": 128},
        "variants": [
            {"name": "fused", "transforms": [
                {"fuse": {"ops": ["a", "b"], "name": "ab", "launch": {"block": "bs", "elems_per_thread": 4}}}]},
            {"name": "fused_ept8", "transforms": [
                {"fuse": {"ops": ["a", "b"], "name": "ab", "launch": {"block": "bs", "elems_per_thread": 8}}}]},
        ],
        "sweep": sweep if sweep is not None else {"hardware": ["h200-sxm", "h100-sxm"], "params": {"bs": [128, 256, 2048]}},
        **extra,
    }
    return write_yaml(tmp_path / "scn.yaml", doc)


@pytest.fixture
def scenario_path(tmp_path: Path) -> Path:
    return tiny_scenario(tmp_path)
