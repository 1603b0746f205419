"""A cold GEMM's weight stream at its own rate (gemm.cold_stream_gbps), fitted jointly with gemm.cold_ramp_us on
the calibration's clean cold GEMMs (issue 16, calib11). Built off: fitted only when the base profile carries the
key; the shipped profile has none and prices the stream at the copy-fitted memory.hbm_sustained_gbps."""

from __future__ import annotations

import dataclasses

import pytest

from sim.calibrate.cases import cases_from_raw
from sim.calibrate.fit import fit_cold_gemms_last, fit_cold_stream
from sim.calibrate.raw import held_out, load_raw
from sim.costmodel import kernel_cost
from sim.costmodel.gemm import gemm_terms
from sim.hardware import Hardware, load_profile
from tests.conftest import ROOT
from tests.costmodel.conftest import one_op_graph


def test_a_cold_gemm_streams_at_its_own_rate_where_the_profile_has_one(testgpu: Hardware) -> None:
    hw = dataclasses.replace(testgpu, gemm_cold_ramp_s=2.8e-6)
    attrs = {"m": 1, "n": 16384, "k": 16384, "dtype": "bf16", "l2": "cold"}
    t = gemm_terms(hw, 1, 16384, 16384, 1, "bf16")
    copy_rate = kernel_cost(*one_op_graph("gemm", attrs), hw)
    assert copy_rate.memory_s == pytest.approx(2.8e-6 + t["hbm_bytes"] / hw.hbm_sustained_bps, rel=1e-12)
    own = kernel_cost(*one_op_graph("gemm", attrs), dataclasses.replace(hw, gemm_cold_stream_bps=4600e9))
    assert own.memory_s == pytest.approx(2.8e-6 + t["hbm_bytes"] / 4600e9, rel=1e-12)
    # a warm GEMM (no l2 attribute) does not read the key
    warm = {k: v for k, v in attrs.items() if k != "l2"}
    assert kernel_cost(*one_op_graph("gemm", warm), dataclasses.replace(hw, gemm_cold_stream_bps=4600e9)).time_s == \
        kernel_cost(*one_op_graph("gemm", warm), hw).time_s


def _cold_cases() -> list:
    raw = load_raw(ROOT / "calibration" / "h200" / "raw")
    groups = {g: list(raw.groups[g].records) for g in raw.groups}
    return [c for c in cases_from_raw(groups) if not held_out(c.record) and c.family == "gemm_cold"]


def test_the_joint_fit_recovers_a_known_ramp_and_rate_and_is_built_off() -> None:
    shipped = load_profile("h200-measured")
    assert shipped.gemm_cold_stream_bps is None  # built off: the base h200-sxm carries no gemm.cold_stream_gbps
    assert load_profile("h200-sxm").gemm_cold_stream_bps is None
    hw = dataclasses.replace(shipped, gemm_correction=(), gemm_cold_stream_bps=shipped.hbm_sustained_bps)
    truth = dataclasses.replace(hw, gemm_cold_ramp_s=2.8e-6, gemm_cold_stream_bps=4600e9)
    cases = [dataclasses.replace(c, measured_us=c.predicted_us(truth)) for c in _cold_cases()]
    assert len(cases) >= 5
    fitted_hw, fits = fit_cold_stream(cases, hw, "l2_cold.json")
    got = {f.key: f for f in fits}
    assert got["cold_ramp_us"].value == pytest.approx(2.8) and got["cold_stream_gbps"].value == pytest.approx(4600)
    assert fitted_hw.gemm_cold_ramp_s == pytest.approx(2.8e-6) and fitted_hw.gemm_cold_stream_bps == pytest.approx(4600e9)
    for f in fits:  # provenance: what was fitted on how many records, with an interval around the value
        assert f.n == len(cases) and f.spread is not None and f.spread[0] <= f.value <= f.spread[1]
        assert "read-only L2 flush" in f.fit
    # a rate past the datasheet peak is not a candidate: data made at 5000 GB/s fit at the peak (4800), flagged
    fast = dataclasses.replace(truth, gemm_cold_stream_bps=5000e9)
    cases = [dataclasses.replace(c, measured_us=c.predicted_us(fast)) for c in _cold_cases()]
    _, fits = fit_cold_stream(cases, hw, "l2_cold.json")
    got = {f.key: f for f in fits}
    assert got["cold_stream_gbps"].value == pytest.approx(hw.hbm_peak_bps / 1e9)
    assert "grid's edge" in got["cold_stream_gbps"].fit


def test_the_calibrations_clean_cold_gemms_stream_faster_than_a_copy() -> None:
    """On the shipped raw folder the joint fit puts the stream above the copy-fitted rate (a read-only stream),
    below the datasheet peak, and the ramp above the ramp-alone fit's (scripts/cold_stream_check.py gives every
    committed calibration's)."""
    shipped = load_profile("h200-measured")
    # as calibrate_from_raw runs it: last, on the profile with its own correction table
    raw = load_raw(ROOT / "calibration" / "h200" / "raw")
    fits = fit_cold_gemms_last(raw, dataclasses.replace(shipped, gemm_cold_stream_bps=shipped.hbm_sustained_bps))
    got = {f.key: float(f.value) for f in fits}  # type: ignore[arg-type]
    # the shipped profile carries the write-back rate (gpu13): it is refitted on top
    assert set(got) == {"cold_ramp_us", "cold_stream_gbps", "l2_dirty_writeback_gbps"}
    assert shipped.hbm_sustained_bps / 1e9 < got["cold_stream_gbps"] < shipped.hbm_peak_bps / 1e9
    assert shipped.gemm_cold_ramp_s is not None and shipped.gemm_cold_ramp_s * 1e6 < got["cold_ramp_us"] < 6


def test_the_joint_fit_runs_only_where_the_profile_carries_the_key_and_takes_the_write_back_along() -> None:
    shipped = load_profile("h200-measured")
    raw = load_raw(ROOT / "calibration" / "h200" / "raw")
    # off: the ramp alone, then the write-back, on the same table
    assert [f"{f.section}.{f.key}" for f in fit_cold_gemms_last(raw, shipped)] == ["gemm.cold_ramp_us",
                                                                                "memory.l2_dirty_writeback_gbps"]
    on = dataclasses.replace(shipped, gemm_cold_stream_bps=shipped.hbm_sustained_bps, l2_dirty_writeback_bps=8000e9)
    fits = fit_cold_gemms_last(raw, on)
    assert [f"{f.section}.{f.key}" for f in fits] == ["gemm.cold_ramp_us", "gemm.cold_stream_gbps",
                                                      "memory.l2_dirty_writeback_gbps"]
    assert all(f.raw.endswith("l2_cold.json") and f.spread is not None for f in fits)
