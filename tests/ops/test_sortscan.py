"""sim/ops/sortscan.py: sort, scan and unique priced as memory-bound sweeps (the profile's `primitives`
estimates), bytes worked out by hand."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from sim.costmodel.pricing import price
from sim.errors import InfeasibleError
from sim.hardware import Hardware
from sim.workload import load_workload
from tests.conftest import ROOT, workload_doc, write_yaml


def _graph(tmp_path: Path, ops: list[dict[str, Any]], tensors: dict[str, Any]) -> Any:
    wl = load_workload(write_yaml(tmp_path / "w.yaml", workload_doc(ops, tensors)))
    return wl.build(wl.params_for(wl.buckets()[0]))


N = 1 << 22
SORT_TENSORS = {"idx": {"shape": [N], "dtype": "int64"}, "pos": {"shape": [N], "dtype": "int64"},
                "sorted": {"shape": [N], "dtype": "int64"}, "order": {"shape": [N], "dtype": "int64"},
                "out": {"shape": [N], "dtype": "int64"}}


def test_sort_scan_unique_are_priced_as_sweeps(tmp_path: Path, h200: Hardware) -> None:
    ops = [
        {"name": "sort", "kind": "sort", "key_bits": 20, "reads": ["idx", "pos"], "writes": ["sorted", "order"]},
        {"name": "scan", "kind": "scan", "reads": ["sorted"], "writes": ["out"]},
        {"name": "uniq", "kind": "unique", "reads": ["sorted"], "writes": ["out"]},
    ]
    g = _graph(tmp_path, ops, SORT_TENSORS)
    sort, scan, uniq = price(g, h200)
    assert sort is not None and scan is not None and uniq is not None
    b = N * 8
    # 20 key bits in 8-bit digits: a histogram sweep of the keys, then 3 of keys + values (read and written)
    assert sort.detail["sweeps"] == 4 and sort.detail["kernels"] == 4
    assert sort.hbm_bytes == pytest.approx(b + 3 * (2 * b + 2 * b))
    assert scan.hbm_bytes == pytest.approx(2 * b) and uniq.hbm_bytes == pytest.approx(3 * b)
    assert sort.detail["source"] == "estimate"
    assert sort.time_s > sort.hbm_bytes / h200.hbm_peak_bps + 3 * h200.kernel_fixed_s
    full_keys = price(_graph(tmp_path, [{**ops[0], "key_bits": None}], SORT_TENSORS), h200)[0]
    assert full_keys is not None and full_keys.detail["sweeps"] == 1 + 8  # int64 keys: 64 bits


def test_profile_without_primitive_estimates_cannot_price_a_sort(tmp_path: Path, testgpu: Hardware) -> None:
    g = _graph(tmp_path, [{"name": "s", "kind": "scan", "reads": ["idx"], "writes": ["out"]}], SORT_TENSORS)
    with pytest.raises(InfeasibleError, match=r"op 's' \(scan\).*no primitives\.scan_passes"):
        price(g, testgpu)


@pytest.mark.parametrize("name", ["a100-sxm-80gb", "h100-sxm", "h200-sxm", "l40s", "h200-measured"])
def test_shipped_profiles_carry_primitive_estimates(name: str) -> None:
    doc = yaml.safe_load((ROOT / "hardware_profiles" / f"{name}.yaml").read_text())
    assert set(doc["primitives"]) == {"radix_digit_bits", "scan_passes", "unique_passes"}
    assert all(q["source"] == "estimate" and q["note"] for q in doc["primitives"].values())
