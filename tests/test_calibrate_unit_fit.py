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
