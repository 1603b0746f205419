"""The elementwise fits recover known values from records the model itself produced, and the
committed math-op costs come from the Triton K-sweep (torch's own kernels stay held out)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from sim.calibrate.raw import RawData, RawGroup
from sim.calibrate.unit_fit import fit_math_ops, math_k_case
from sim.hardware import load_profile
from tests.conftest import ROOT


def test_math_op_fit_recovers_a_known_cost() -> None:
    hw = load_profile("h200-sxm")
    truth = dataclasses.replace(hw, op_costs={**hw.op_costs, "sin": (31.0, 0.0, 0.0)})
    recs = []
    for k in (1, 4, 16):
        rec = {"bench": "math_k", "op": "sin", "K": k, "numel": 1 << 25, "BLOCK": 1024, "num_warps": 4,
               "grid": [1 << 15], "n_regs": 28, "n_spills": 0, "time_us": 1.0}
        rec["time_us"] = math_k_case(rec, "sin").predicted_us(truth)
        recs.append(rec)
    raw = RawData(root=Path("."), groups={"math_ops": RawGroup("math_ops", "math_ops.json", {}, tuple(recs))})
    (fitted,) = fit_math_ops(raw, hw)
    assert fitted.key == "sin" and fitted.value == {"fp32": pytest.approx(31.0, abs=0.05), "sfu": 0.0, "int": 0.0}


def test_committed_math_costs_are_fitted_on_the_triton_sweep_only() -> None:
    costs = yaml.safe_load((ROOT / "hardware_profiles" / "h200-measured.yaml").read_text())["compute"]["op_costs"]
    for name in ("sin", "cos", "log", "pow", "tanh", "sigmoid"):
        assert costs[name]["source"] == "measured" and costs[name]["raw"].endswith("math_ops.json")
    raw = yaml.safe_load((ROOT / "calibration" / "h200" / "raw" / "math_ops.json").read_text())
    assert {r["bench"] for r in raw["records"]} == {"math_k"}


def _small_grid_raw(truth: object) -> RawData:
    """The committed register_small configs (small grids, 16-warp blocks) timed by the model at `truth`."""
    import json

    from sim.calibrate.cases import cases_from_raw

    doc = json.loads((ROOT / "calibration" / "h200" / "raw" / "register_small.json").read_text())
    recs = []
    for rec in doc["records"]:
        (case,) = cases_from_raw({"register_sweep": [rec]})
        recs.append({**rec, "time_us": case.predicted_us(truth)})  # type: ignore[arg-type]
    return RawData(root=Path("."), groups={"register_small": RawGroup("register_small", "register_small.json", {},
                                                                        tuple(recs))})


def test_spill_fits_read_the_small_grid_group() -> None:
    """The in-flight bytes of latency-bound spills come from the small grids' spilling configs; the L1
    spill ceiling stays the sweep's (full SMs)."""
    from sim.calibrate.unit_fit import fit_spills

    hw = load_profile("h200-measured")
    truth = dataclasses.replace(hw, spill_inflight_bytes_per_thread=40.0)
    raw = _small_grid_raw(truth)
    spills = {f.key: f for f in fit_spills(raw, truth)}
    assert "spill_gbps" not in spills  # the L1 ceiling is the sweep's (full SMs)
    assert spills["spill_inflight_bytes_per_thread"].value == pytest.approx(40.0, rel=0.08)
    assert spills["spill_offchip_gbps"].raw == "register_small.json"


def test_the_shipped_offchip_spill_fit_reads_the_small_grids() -> None:
    prof = yaml.safe_load((ROOT / "hardware_profiles" / "h200-measured.yaml").read_text())
    entry = prof["memory"]["spill_offchip_gbps"]
    assert entry["raw"].endswith("register_sweep.json") and "register_small.json" in entry["fit"]
    # the knee and the per-thread instructions read both register groups (issue 18, gpu7)
    assert "register_small.json" in prof["compute"]["warps_to_hide_latency"]["fit"]
    assert "register_small.json" in prof["compute"]["thread_instr"]["fit"]
    assert prof["compute"]["op_costs"]["rng"]["fit"].startswith("least squares")  # the model-based refit


def test_per_thread_instructions_and_the_knee_are_recovered_from_the_register_groups() -> None:
    """The committed register-group configs timed by the model at known values: the fit finds a Triton
    thread's per-iteration instructions (issue-bound configs), then the knee on top."""
    import json

    from sim.calibrate.cases import cases_from_raw
    from sim.calibrate.unit_fit import fit_latency_hiding

    hw = load_profile("h200-measured")
    truth = dataclasses.replace(hw, thread_instr=60.0, warps_to_hide_latency=2.2, latency_hiding_exponent=4.0)
    groups = {}
    for group in ("register_sweep", "register_small"):
        doc = json.loads((ROOT / "calibration" / "h200" / "raw" / f"{group}.json").read_text())
        recs = []
        for rec in doc["records"]:
            (case,) = cases_from_raw({"register_sweep": [rec]})
            recs.append({**rec, "time_us": case.predicted_us(truth)})
        groups[group] = RawGroup(group, f"{group}.json", {}, tuple(recs))
    raw = RawData(root=Path("."), groups=groups)
    got = {f.key: f.value for f in fit_latency_hiding(raw, hw)}
    assert got["thread_instr"] == 60.0
    assert got["warps_to_hide_latency"] == pytest.approx(2.2, abs=0.02) and got["latency_hiding_exponent"] == 4.0
    # a base profile without the Triton term keeps the older partial-vector fit only
    old = fit_latency_hiding(raw, dataclasses.replace(hw, thread_instr=None))
    assert "thread_instr" not in {f.key for f in old} and "partial_vector_instr" in {f.key for f in old}


def test_the_random_number_cost_is_fitted_with_each_kernels_latency_hiding() -> None:
    """rand_x1..16 timed by the model at a known Philox cost: fit_rng recovers it although rand_x16
    holds 128 registers per thread (4 warps per scheduler), which the plain K-slope counts as Philox work."""
    import json

    from sim.calibrate.cases import cases_from_raw
    from sim.calibrate.fit import fit_unit_costs
    from sim.calibrate.unit_fit import fit_rng

    hw = load_profile("h200-measured")
    truth = dataclasses.replace(hw, op_costs={**hw.op_costs, "rng": (0.0, 0.0, 45.0)})
    doc = json.loads((ROOT / "calibration" / "h200" / "raw" / "elementwise.json").read_text())
    recs = []
    for rec in doc["records"]:
        if str(rec.get("kernel", "")).startswith("rand_x"):
            (case,) = cases_from_raw({"elementwise": [rec]})
            recs.append({**rec, "time_us": case.predicted_us(truth)})
    raw = RawData(root=Path("."), groups={"elementwise": RawGroup("elementwise", "elementwise.json", {}, tuple(recs))})
    (rng,) = fit_rng(raw, hw)
    assert rng.value["int"] == pytest.approx(45.0, abs=0.25)
    slope = {f.key: f.value for f in fit_unit_costs(raw, 132, {"fp32": 128.0, "int": 64.0, "sfu": 16.0})[0]}
    assert slope["rng"]["int"] > 46.0  # the K-slope reads rand_x16's lost latency hiding as Philox work
