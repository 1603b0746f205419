"""A workload's launch can give a Triton kernel's local-memory traffic (`spill_traffic_bytes_per_thread`, what
ptxas -v prints as spill stores + spill loads): the shipped H200 profile prices it (issue 18)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from sim.costmodel.pricing import price
from sim.errors import InputError
from sim.hardware import load_profile
from sim.workload import load_workload
from tests.conftest import workload_doc, write_yaml

TENSORS = {"x": {"shape": ["n"], "dtype": "bf16"}, "y": {"shape": ["n"], "dtype": "bf16"}}
OP = {"name": "k", "kind": "elementwise", "reads": ["x"], "writes": ["y"], "math": {"erf": 1, "rng": 1},
      "library": "triton",
      "launch": {"block": 128, "elems_per_thread": 128, "regs_per_thread": 32, "spill_bytes_per_thread": 4376}}


def _graph(tmp_path: Path, launch: dict[str, Any]) -> Any:
    doc = workload_doc([{**OP, "launch": {**OP["launch"], **launch}}], TENSORS, params={"n": 4096 * 1024})
    wl = load_workload(write_yaml(tmp_path / "w.yaml", doc))
    return wl.build(wl.params_for(wl.buckets()[0]))


def test_the_shipped_profile_prices_the_given_traffic(tmp_path: Path) -> None:
    hw = load_profile("h200-measured")
    assert hw.spill_traffic_from_accesses and hw.spill_offchip_traffic_ratio
    plain = _graph(tmp_path, {})
    counted = _graph(tmp_path, {"spill_traffic_bytes_per_thread": "11176 + 14848"})
    assert counted.ops[0].launch.spill_traffic_bytes_per_thread == 26024
    (a,), (b,) = price(plain, hw), price(counted, hw)
    assert a is not None and b is not None and a.detail["spill_offchip"] and b.detail["spill_offchip"]
    threads = 4096 * 1024 / 128
    # without counts: past L1 the fitted ratio times the area stored once and loaded once
    assert a.detail["spill_traffic_bytes"] == pytest.approx(hw.spill_offchip_traffic_ratio * 2 * 4376 * threads)
    assert b.detail["spill_traffic_bytes"] == pytest.approx(26024 * threads)
    # with the switch off the counts are not read
    off = dataclasses.replace(hw, spill_traffic_from_accesses=False)
    (c,), (d,) = price(plain, off), price(counted, off)
    assert c is not None and d is not None and c.time_s == d.time_s
    assert d.detail["spill_traffic_bytes"] == pytest.approx(2 * 4376 * threads)


def test_a_negative_traffic_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"ops\[0\]\.launch\.spill_traffic_bytes_per_thread.*>= 0"):
        _graph(tmp_path, {"spill_traffic_bytes_per_thread": -4})
