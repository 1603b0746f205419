"""The host table by framework op, fitted from real traces (sim/calibrate/host_fit.py), and its use:
replay --host model, workload ops with `framework_op`."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from sim.calibrate.host_fit import fit_table, trace_op_samples
from sim.costmodel.host import eager_dispatch_s, framework_op_s, host_op_s, op_key
from sim.graph import Op
from sim.hardware import Hardware, load_profile

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "traces"
HELDOUT = ROOT / "validation" / "h200" / "traces_heldout"
PER_EVENT = {"plain": 1.877, "shapes": 2.253, "stack": 1.326}


def _with_table(hw: Hardware, table: dict[str, dict[str, float]]) -> Hardware:
    us = 1e-6
    return replace(hw, framework_op_table_s={
        k: (v["us"] * us if "us" in v else None, v["grad_us"] * us if "grad_us" in v else None)
        for k, v in table.items()})


def test_op_key_strips_the_engine_prefix() -> None:
    assert op_key("autograd::engine::evaluate_function: MmBackward0") == "MmBackward0"
    assert op_key("aten::addmm") == "aten::addmm"


def test_samples_split_grad_from_no_grad() -> None:
    decode = trace_op_samples(FIXTURES / "decode_eager.json.gz", PER_EVENT)
    assert decode["aten::linear"].plain and not decode["aten::linear"].grad  # no_grad decode
    train = trace_op_samples(FIXTURES / "transformer_eager.json.gz", PER_EVENT)
    assert train["aten::linear"].grad and not train["aten::linear"].plain  # a training step's forward
    assert train["AddmmBackward0"].plain  # backward nodes record nothing
    assert "ProfilerStep#2" not in train and not any(k.startswith("Torch-Compiled") for k in train)


def test_profiler_cost_is_taken_off_per_event() -> None:
    a = trace_op_samples(FIXTURES / "decode_eager.json.gz", {"shapes": 0.0})["aten::layer_norm"].plain
    b = trace_op_samples(FIXTURES / "decode_eager.json.gz", {"shapes": 1.0})["aten::layer_norm"].plain
    diffs = [round(x - y, 6) for x, y in zip(a, b, strict=True)]
    assert all(d >= 1.0 and d == int(d) for d in diffs), diffs  # 1 us per event: whole events, the op included


def test_table_fitted_on_decode_b8_predicts_other_decode_sizes() -> None:
    """Fit on the B=8 decode fixture only; predict the held-out B=1 and B=32 decode steps with
    `--host model` against their steps measured without the profiler. The flat per-kind costs
    (tight loops of one op) are 26-30 % short there."""
    from sim.replay import replay

    hw = load_profile("h200-measured")
    table = fit_table([FIXTURES / "decode_eager.json.gz"], PER_EVENT)
    assert set(table) >= {"aten::linear", "aten::layer_norm", "aten::scaled_dot_product_attention", "aten::add"}
    hwt = _with_table(hw, table)
    raw = json.loads((ROOT / "calibration" / "h200" / "raw" / "profiler_overhead.json").read_text())
    unprofiled = {r["path"]: r["unprofiled_step_us"] for r in raw["records"] if r.get("bench") == "heldout_trace"}
    for p in sorted(HELDOUT.glob("decode_eager_*.json.gz")):
        flat = replay(p, hw, "predict", host="model", unprofiled_us=unprofiled[p.name])[0]["unprofiled_error"]
        fitted = replay(p, hwt, "predict", host="model", unprofiled_us=unprofiled[p.name])[0]["unprofiled_error"]
        assert abs(fitted) <= 0.10 and abs(fitted) < abs(flat), (p.name, flat, fitted)


def test_workload_ops_use_the_table(h200: Hardware) -> None:
    hw = replace(h200, framework_op_table_s={"aten::linear": (20e-6, 45e-6), "aten::view": (3e-6, None)})
    plain = Op(name="g", kind="gemm", attrs={"framework_op": "aten::linear"})
    grad = Op(name="g", kind="gemm", attrs={"framework_op": "aten::linear", "requires_grad": True})
    unknown = Op(name="g", kind="gemm", attrs={"framework_op": "aten::bmm"})
    assert eager_dispatch_s(plain, hw) == pytest.approx(20e-6 - hw.launch_s)
    assert eager_dispatch_s(grad, hw) == pytest.approx(45e-6 - hw.launch_s)
    assert eager_dispatch_s(unknown, hw) == hw.eager_op_by_kind_s.get("gemm", hw.eager_op_s)
    views = Op(name="v", kind="host", attrs={"framework_op": "aten::view", "framework_ops": 4})
    assert host_op_s(views, hw) == pytest.approx(12e-6)
    assert framework_op_s("aten::view", hw, requires_grad=True) == pytest.approx(3e-6)  # no grad entry: plain


def test_training_workload_marks_forward_framework_ops(tmp_path: Path) -> None:
    from sim.workload import load_workload
    from tests.conftest import write_yaml

    doc = {"schema": "kernelsim.workload/v1", "name": "t", "kind": "training", "parameters": {"n": 1024},
           "distribution": {"buckets": [{"params": {"n": 1024}, "weight": 1}]},
           "tensors": {"x": {"shape": ["n"], "dtype": "bf16"}, "y": {"shape": ["n"], "dtype": "bf16"}},
           "ops": [{"name": "f", "kind": "elementwise", "reads": ["x"], "writes": ["y"], "framework_op": "aten::gelu"},
                   {"name": "b", "kind": "elementwise", "reads": ["y"], "writes": ["x"], "phase": "backward",
                    "framework_op": "GeluBackward0"}]}
    wl = load_workload(write_yaml(tmp_path / "w.yaml", doc))
    g = wl.build(wl.params_for(wl.buckets()[0]))
    assert g.ops[0].attrs["requires_grad"] is True and "requires_grad" not in g.ops[1].attrs
    assert g.ops[1].attrs["framework_op"] == "GeluBackward0"


def test_the_table_is_written_into_the_profile_document_and_loads(tmp_path: Path) -> None:
    from sim.calibrate.host_fit import table_entries, with_table
    from sim.calibrate.profile_yaml import dump_profile, load_profile_doc

    table = fit_table([FIXTURES / "decode_eager.json.gz"], PER_EVENT)
    entries = table_entries(table, "NVIDIA H200 (test)", "2026-11-30", "../x/host_context", "a test fit")
    doc, header = load_profile_doc((ROOT / "hardware_profiles" / "h200-measured.yaml").read_text())
    once = with_table(doc, entries)
    assert with_table(once, entries) == once  # replacing the table again changes nothing
    assert list(once) == list(doc) and list(once["host"]) == list(doc["host"])  # keys keep their places
    assert {k: v for k, v in once["host"].items() if k != "framework_ops"} == \
        {k: v for k, v in doc["host"].items() if k != "framework_ops"}  # nothing else changed
    assert {k: v for k, v in once.items() if k != "host"} == {k: v for k, v in doc.items() if k != "host"}
    path = tmp_path / "p.yaml"
    path.write_text(dump_profile(once, header))
    hw = load_profile(str(path))
    assert hw.framework_op_table_s["aten::linear"][0] == pytest.approx(table["aten::linear"]["us"] * 1e-6)
