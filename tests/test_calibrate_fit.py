"""Fitting a profile from raw data runs without a GPU; the committed measured profile is exactly
what the fit produces from the committed raw data; the fits recover known synthetic values."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sim.calibrate.fit import calibrate_from_raw, fit_copy, fit_unit_costs
from sim.calibrate.raw import RawGroup, load_raw
from sim.cli import main
from sim.errors import InputError
from tests.conftest import ROOT

RAW = ROOT / "calibration" / "h200" / "raw"
BASE = ROOT / "hardware_profiles" / "h200-sxm.yaml"
MEASURED = ROOT / "hardware_profiles" / "h200-measured.yaml"


def test_committed_profile_is_the_fit_of_the_committed_raw_data() -> None:
    text, result = calibrate_from_raw(RAW, BASE, MEASURED, "h200-measured")
    assert text == MEASURED.read_text(), "regenerate: kernelsim calibrate --from-raw calibration/h200/raw --out hardware_profiles/h200-measured.yaml"
    keys = {(v.section, v.key) for v in result.values}
    assert {("memory", "hbm_sustained_gbps"), ("memory", "latency_ns"), ("kernel", "fixed_us"),
            ("compute.op_costs", "rng"), ("compute", "warps_to_hide_latency"), ("gemm", "max_efficiency")} <= keys
    assert len(result.gemm_correction) > 50


def test_measured_numbers_carry_provenance() -> None:
    import yaml

    doc = yaml.safe_load(MEASURED.read_text())
    q = doc["memory"]["latency_ns"]
    assert q["source"] == "measured" and "H200" in q["measured_on"] and q["raw"].endswith("copy.json") and q["fit"]


def _raw(tmp_path: Path, group: str, records: list[dict]) -> Path:  # type: ignore[type-arg]
    meta = {"gpu_name": "Test GPU", "sm_count": 100, "date_utc": "2026-11-29T00:00:00",
            "nvidia_smi": {"sm_clock_max_mhz": 1000.0, "driver": "1"}}
    (tmp_path / f"{group}.json").write_text(json.dumps({"meta": meta, "group": group, "records": records}))
    return tmp_path


def test_latency_from_littles_law(tmp_path: Path) -> None:
    # Each CTA keeps BLOCK=4096 bf16 (8 KiB) in flight; at 400 ns latency one CTA moves 20.48 GB/s.
    recs = [{"bench": "copy_persistent", "ctas": c, "BLOCK": 4096, "gbps": c * 8192 / 400e-9 / 1e9} for c in (1, 2, 4, 8)]
    recs += [{"bench": "copy", "impl": "torch_copy_", "bytes": 8192, "numel": 2048, "time_us": 3.4}]
    raw = load_raw(_raw(tmp_path, "copy", recs))
    fitted = {f.key: f.value for f in fit_copy(raw, sm_count=100)}
    assert fitted["latency_ns"] == pytest.approx(400.0, rel=1e-6)
    assert fitted["fixed_us"] == pytest.approx(3.0, rel=1e-6)


def test_unit_cost_is_the_slope_over_calls_per_element(tmp_path: Path) -> None:
    # 100 SMs at 1 GHz; each extra erf per element costs 0.25 SM-cycles ⇒ 32 FP32-lane instructions.
    numel = 1 << 24
    per_call_s = 0.25 * numel / (100 * 1e9)
    recs = [{"bench": "elementwise", "impl": "triton", "kernel": f"erf_x{k}", "k": k, "numel": numel,
             "time_us": (10e-6 + k * per_call_s) * 1e6} for k in (1, 4, 16)]
    raw = load_raw(_raw(tmp_path, "elementwise", recs))
    fitted, _ = fit_unit_costs(raw, 100, {"fp32": 128.0, "int": 64.0, "sfu": 16.0})
    erf = next(f for f in fitted if f.key == "erf")
    assert isinstance(erf.value, dict) and erf.value["fp32"] == pytest.approx(32.0, rel=1e-3)


def test_bad_raw_folder_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no raw calibration files"):
        load_raw(tmp_path)
    (tmp_path / "copy.json").write_text("{not json")
    with pytest.raises(InputError, match="cannot read raw data"):
        load_raw(tmp_path)


def test_calibrate_command_from_raw(tmp_path: Path) -> None:
    out = tmp_path / "h200-refit.yaml"
    assert main(["calibrate", "--from-raw", str(RAW), "--out", str(out), "--name", "h200-refit"]) == 0
    from sim.hardware import load_profile

    hw = load_profile(str(out))
    assert hw.name == "h200-refit" and hw.measured
    assert main(["calibrate", "--from-raw", str(tmp_path / "nope"), "--out", str(tmp_path / "x.yaml")]) == 2
    assert not (tmp_path / "x.yaml").exists()


def test_raw_group_is_frozen_data() -> None:
    g = RawGroup("copy", "copy.json", {}, ())
    assert g.records == ()
