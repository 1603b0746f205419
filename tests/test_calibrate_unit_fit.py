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


def test_latency_hiding_and_spill_fits_read_the_small_grid_group() -> None:
    """Small grids (1/4..4 resident warps per scheduler) pin the knee: the fit recovers W and n from the
    register_small group alone (when asked: off by default), and the in-flight bytes of latency-bound
    spills from its spilling configs (on by default)."""
    from sim.calibrate.unit_fit import REGISTER_GROUPS, fit_latency_hiding, fit_spills

    hw = load_profile("h200-measured")
    truth = dataclasses.replace(hw, warps_to_hide_latency=1.7, latency_hiding_exponent=4.0,
                                spill_inflight_bytes_per_thread=40.0)
    raw = _small_grid_raw(truth)
    assert fit_latency_hiding(raw, hw) == []  # off by default: the knee is fitted on the sweep alone
    lat = {f.key: f for f in fit_latency_hiding(raw, hw, groups=REGISTER_GROUPS)}
    assert lat["warps_to_hide_latency"].value == pytest.approx(1.7, abs=0.02)
    assert lat["latency_hiding_exponent"].value == 4.0
    assert lat["warps_to_hide_latency"].raw == "register_small.json"
    spills = {f.key: f for f in fit_spills(raw, truth)}
    assert "spill_gbps" not in spills  # the L1 ceiling is the sweep's (full SMs)
    assert spills["spill_inflight_bytes_per_thread"].value == pytest.approx(40.0, rel=0.08)
    assert spills["spill_offchip_gbps"].raw == "register_small.json"


def test_the_shipped_offchip_spill_fit_reads_the_small_grids() -> None:
    prof = yaml.safe_load((ROOT / "hardware_profiles" / "h200-measured.yaml").read_text())
    entry = prof["memory"]["spill_offchip_gbps"]
    assert entry["raw"].endswith("register_sweep.json") and "register_small.json" in entry["fit"]
    assert "register_small.json" not in prof["compute"]["warps_to_hide_latency"]["fit"]
