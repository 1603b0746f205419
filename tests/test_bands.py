"""Error bands (sim.validate.bands): intervals, coverage, gating of validation groups, run JSON fields."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sim.cli import main
from sim.errors import InputError
from sim.validate.bands import (
    Sample,
    annotate_run,
    fmt_gain,
    gain_interval,
    interval_of,
    load_bands,
    loo_coverage,
    regime_of,
    time_interval,
)
from sim.validate.core import check

ROOT = Path(__file__).resolve().parent.parent


def test_interval_needs_19_samples_for_90_percent() -> None:
    assert interval_of(list(range(18))) is None
    assert interval_of([float(x) for x in range(19)]) == (0.0, 18.0)  # k = 1: min and max
    assert interval_of([float(x) for x in range(39)]) == (1.0, 37.0)  # k = 2


def test_time_and_gain_interval_conventions() -> None:
    # predicted 100 µs, errors between -50 % and +25 %: measured between 80 and 200 µs
    assert time_interval(100.0, -0.5, 0.25) == pytest.approx((80.0, 200.0))
    # predicted gain +2 %, predicted − measured between -1 pp and +3 pp: measured between -1 % and +3 %
    assert gain_interval(0.02, -1.0, 3.0) == pytest.approx((-0.01, 0.03))
    assert fmt_gain(0.015, [-0.008, 0.039]) == "+1.5% [-0.8, +3.9]"


def test_regime_from_gpu_idle_share() -> None:
    assert regime_of(100.0, 50.0, 0.3) == "host-bound"
    assert regime_of(100.0, 80.0, 0.3) == "gpu-bound"


def test_leave_one_out_coverage_counts_what_falls_inside() -> None:
    # 40 errors 0..39 in one key: leaving x out, the band of the other 39 is [x_(2), x_(38)] of them.
    samples = [Sample("gpu-bound", "unseen", float(x), label=str(x)) for x in range(40)]
    c = loo_coverage(samples)
    # 0, 1 and 38, 39 fall outside the band fitted without them; the 36 others inside.
    assert (c.n, c.inside) == (40, 36)
    # A twin with the same label in the other split is left out too (it is not independent).
    twins = samples + [Sample("gpu-bound", "calibrated", float(x), label=str(x)) for x in range(40)]
    assert loo_coverage(twins).inside == 36
    # Calibrated samples are not scored.
    assert loo_coverage(twins, split="calibrated").n == 40


def test_leave_case_out_drops_the_whole_case() -> None:
    a = [Sample("gpu-bound", "unseen", 0.0, group="a", label=f"a{i}") for i in range(20)]
    b = [Sample("gpu-bound", "unseen", 1.0, group="b", label=f"b{i}") for i in range(20)]
    # Each case alone is constant: fitted on the other case, the band misses every sample.
    assert loo_coverage(a + b, by_group=True).inside == 0
    assert loo_coverage(a + b).inside == 40


def _measured() -> dict[str, dict[str, float]]:
    return {"step/x/unseen": {"median_abs": 0.3, "p90_abs": 0.5, "n": 8.0},
            "bands/time/leave_one_out": {"coverage": 0.8, "n": 40.0}}


def test_every_group_needs_a_gate() -> None:
    with pytest.raises(InputError, match="no gate"):
        check(_measured(), {"gates": {"step/x/unseen": {"tripwire": {"median_abs": 0.4}}}})


def test_ungated_needs_a_reason() -> None:
    gates = {"step/x/unseen": {"ungated": "  "}, "bands/time/leave_one_out": {"ungated": "new"}}
    with pytest.raises(InputError, match="reason"):
        check(_measured(), {"gates": gates})


def test_a_limit_on_a_missing_quantity_is_an_error() -> None:
    gates = {"step/x/unseen": {"tripwire": {"median_ab": 0.4}}, "bands/time/leave_one_out": {"ungated": "new"}}
    with pytest.raises(InputError, match="does not have"):
        check(_measured(), {"gates": gates})


def test_goals_report_and_tripwires_fail() -> None:
    gates = {"step/x/unseen": {"goal": {"median_abs": 0.1}, "tripwire": {"median_abs": 0.35, "p90_abs": 0.45}},
             "bands/time/leave_one_out": {"goal": {"min_coverage": 0.9}, "tripwire": {"min_coverage": 0.75}},
             "gone/y": {"ungated": "an old group"}}
    r = check(_measured(), {"gates": gates})
    assert r.failed and r.tripwires_exceeded == ["step/x/unseen: p90_abs 0.500 (limit <= 0.450)"]
    assert len(r.goals_not_met) == 2 and r.stale == ["gone/y"]
    gates["step/x/unseen"]["tripwire"]["p90_abs"] = 0.55
    assert not check(_measured(), {"gates": gates}).failed


def test_validate_without_a_gate_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    thr = tmp_path / "t.yaml"
    thr.write_text("schema: kernelsim.thresholds/v2\ngates: {}\n")
    assert main(["validate", "--thresholds", str(thr)]) == 2
    assert "no gate" in capsys.readouterr().err


def _run(tmp_path: Path) -> dict[str, Any]:
    out = tmp_path / "r.json"
    assert main(["run", str(ROOT / "scenarios" / "bias_gelu_dropout.yaml"), "--hardware", "h200-measured",
                 "--json", str(out)]) == 0
    return json.loads(out.read_text())


def test_run_json_carries_intervals(tmp_path: Path) -> None:
    doc = _run(tmp_path)
    hw = doc["hardware"][0]
    assert hw["error_band"]["same_profile"] and hw["error_band"]["validated_profile"] == "h200-measured"
    for v in hw["variants"]:
        lo, hi = v["gain_interval"]
        assert lo <= v["gain_vs_baseline"] <= hi or v["name"] != "baseline"
        t_lo, t_hi = v["weighted_time_interval_us"]
        assert t_lo < t_hi
        for b in v["buckets"]:
            assert b["regime"] in ("host-bound", "gpu-bound") and b["shapes"] in ("calibrated", "unseen")
            lo_t, hi_t = b["time_interval_us"]
            assert 0 < lo_t < hi_t
            g_lo, g_hi = b["gain_interval"]
            assert g_lo <= g_hi
            if v["name"] == "baseline":
                assert b["gain_interval"] == [0.0, 0.0]
    # The seed scenario's GEMMs sit on correction-table points.
    assert any(b["shapes"] == "calibrated" for b in hw["variants"][0]["buckets"])


def test_bucket_band_follows_the_band_file(tmp_path: Path) -> None:
    doc = _run(tmp_path)
    bands = load_bands()
    assert bands is not None
    b = doc["hardware"][0]["variants"][1]["buckets"][-1]
    key = f"{b['regime']}/{b['shapes']}"
    entry = bands.time_error.get(key) or bands.time_error[f"{b['regime']}/any"]
    assert b["time_interval_us"] == pytest.approx([b["time_us"] / (1 + entry["hi_err"]),
                                                   b["time_us"] / (1 + entry["lo_err"])])


def test_no_band_file_gives_null_intervals() -> None:
    result = {"hardware": [{"name": "x", "variants": [
        {"name": "baseline", "gain_vs_baseline": 0.0,
         "buckets": [{"time_us": 10.0, "kernel_time_us": 9.0, "weight": 1.0, "gain_vs_baseline": 0.0,
                      "shapes": "unseen"}]}]}]}
    annotate_run(result, None)
    v = result["hardware"][0]["variants"][0]
    assert v["buckets"][0]["time_interval_us"] is None and v["weighted_time_interval_us"] is None
    assert result["hardware"][0]["error_band"]["file"] is None


def test_shipped_band_file_loads() -> None:
    bands = load_bands(ROOT / "validation" / "bands.yaml")
    assert bands is not None and bands.profile == "h200-measured"
    assert "gpu-bound/unseen" in bands.time_error and "gpu-bound/unseen" in bands.gain_error


def test_serve_comparison_carries_gain_bands() -> None:
    from sim.serving.run import compare

    def point(ms: float) -> dict[str, Any]:
        return {f"{m}_ms": {"p50": ms, "p90": ms, "p99": ms} for m in ("e2e", "ttft", "tpot")}

    rows = compare({"eager": point(10.0), "graphs": point(8.0)}, "eager", 5.0)
    lo, hi = rows[0]["e2e_interval"]["p50"]
    assert rows[0]["e2e"]["p50"] == pytest.approx(0.2) and lo < 0.2 < hi
