"""One framework op that launches several kernels (`launches: N`, e.g. a foreach optimizer); the sort /
scan / unique op kinds: tests/ops/test_sortscan.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sim.costmodel.host import host_costs
from sim.costmodel.pricing import price
from sim.engine import simulate
from sim.errors import InputError
from sim.hardware import Hardware
from sim.workload import load_workload
from tests.conftest import workload_doc, write_yaml

P = 64 * 1024 * 1024  # parameters
ADAM_TENSORS = {n: {"shape": [P], "dtype": "fp32"} for n in ("p", "g", "m", "v")}
ADAM = {"name": "adamw", "kind": "elementwise", "reads": ["p", "g", "m", "v"], "writes": ["p", "m", "v"],
        "math": {"fma": 6, "rsqrt": 1, "div": 1}, "phase": "optimizer"}


def _graph(tmp_path: Path, ops: list[dict[str, Any]], tensors: dict[str, Any]) -> Any:
    wl = load_workload(write_yaml(tmp_path / "w.yaml", workload_doc(ops, tensors)))
    return wl.build(wl.params_for(wl.buckets()[0]))


def test_foreach_op_launches_its_kernels_under_one_dispatch(tmp_path: Path, h200: Hardware) -> None:
    one = _graph(tmp_path, [ADAM], ADAM_TENSORS)
    many = _graph(tmp_path, [{**ADAM, "launches": 64}], ADAM_TENSORS)
    assert many.kernel_count() == 64
    assert many.ops[0].name == "adamw.launch0" and many.ops[-1].name == "adamw"
    (c1,), costs = price(one, h200), price(many, h200)
    assert c1 is not None and all(c is not None for c in costs)
    # the work is split, not repeated: the same bytes in all, each kernel paying its fixed cost
    assert sum(c.hbm_bytes for c in costs if c) == pytest.approx(c1.hbm_bytes, rel=1e-9)
    assert sum(c.time_s for c in costs if c) > c1.time_s
    host = [iv for iv in simulate(many, costs, host_costs(h200)).host()]
    assert sum(1 for iv in host if iv.cat == "dispatch") == 1
    assert sum(1 for iv in host if iv.cat == "launch") == 64


def test_waiting_on_a_multi_launch_op_waits_for_its_last_kernel(tmp_path: Path, h200: Hardware) -> None:
    tensors = {**ADAM_TENSORS, "flag": {"shape": [1], "dtype": "fp32"}}
    after = {"name": "after", "kind": "elementwise", "reads": ["flag"], "writes": ["flag"], "stream": 1,
             "after": ["adamw"]}
    g = _graph(tmp_path, [{**ADAM, "launches": 8}, after], tensors)
    trace = simulate(g, price(g, h200), host_costs(h200))
    ends = {g.ops[iv.op].name: iv.end_s for iv in trace.kernels()}
    starts = {g.ops[iv.op].name: iv.start_s for iv in trace.kernels()}
    assert starts["after"] >= max(e for n, e in ends.items() if n.startswith("adamw"))


def test_only_streaming_ops_launch_several_kernels(tmp_path: Path) -> None:
    tensors = {"a": {"shape": [64, 64], "dtype": "bf16"}}
    gemm = {"name": "mm", "kind": "gemm", "m": 64, "n": 64, "k": 64, "reads": ["a"], "writes": ["a"], "launches": 2}
    with pytest.raises(InputError, match=r"ops\[0\]\.launches.*only elementwise and copy"):
        _graph(tmp_path, [gemm], tensors)
