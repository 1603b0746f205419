"""Issue 16: fits that stay put from one calibration to the next, and the harness behind them."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from sim.calibrate.fit import FitResult, decode_kernel_s, fit_host_costs, fit_model_based
from sim.calibrate.raw import RawData, RawGroup, load_raw
from sim.calibrate.repro import Calibration, drivers
from sim.hardware import load_profile
from tests.conftest import ROOT

MEASURED = ROOT / "hardware_profiles" / "h200-measured.yaml"


def _group(name: str, records: list[dict[str, Any]]) -> RawGroup:
    return RawGroup(name, f"{name}.json", {}, tuple(records))


def _host_raw(train_k1: list[float]) -> RawData:
    """Synthetic host costs: gelu 8 us, autograd node 20 us, .backward() 60 us, compiled call 50 us,
    compiled backward call 300 us, 12 us per kernel launch; the 1-matmul train step as given per round."""
    gelu, node, bcall, call, cbc, ck = 8.0, 20.0, 60.0, 50.0, 300.0, 12.0
    recs: list[dict[str, Any]] = [{"bench": "eager_op", "op": "gelu", "host_us_per_op": gelu}]
    for n in (1, 4, 16):
        recs.append({"bench": "autograd_chain", "ops": n, "backward": False, "host_us_per_call": n * gelu})
        recs.append({"bench": "autograd_chain", "ops": n, "backward": True,
                     "host_us_per_call": n * gelu + bcall + n * (node + gelu)})
    for run, t1 in enumerate(train_k1, 1):
        for k in (1, 4):
            train = t1 if k == 1 else call + cbc + bcall + 2 * node + 3 * k * ck
            recs.append({"bench": "compiled_chain", "matmuls": k, "run": run, "forward_host_us": call + k * ck,
                         "train_step_host_us": train})
    launch = {"bench": "launch", "kernel": "triton_empty", "eager_host_enqueue_us": ck, "graph_device_us_per_kernel": 0.7}
    return RawData(Path("."), {"host_costs": _group("host_costs", recs), "kernel_overhead": _group("kernel_overhead", [launch])})


def test_compiled_chain_fits_recover_the_costs_and_a_noisy_step_leaves_the_forward_fits() -> None:
    exact = 50.0 + 300.0 + 60.0 + 40.0 + 36.0
    fitted = {f.key: f.value for f in fit_host_costs(_host_raw([exact, exact, exact]))}
    assert fitted["compiled_backward_call_us"] == pytest.approx(300.0, abs=0.01)
    for rounds in ([exact, exact - 250.0, exact], [exact + 300.0, exact, exact]):
        fitted = {f.key: f.value for f in fit_host_costs(_host_raw(rounds))}
        assert fitted["compiled_call_us"] == pytest.approx(50.0, abs=0.01)
        assert fitted["compiled_kernel_us"] == pytest.approx(12.0)


def _decode_records(profiled: bool) -> list[dict[str, Any]]:
    recs = [r for r in json.loads((ROOT / "calibration/h200/runs/D/raw/attention.json").read_text())["records"]
            if r["bench"] == "sdpa_decode"]
    if not profiled:
        recs = [{k: v for k, v in r.items() if k != "kernels"} for r in recs]
    return recs


@pytest.mark.parametrize("profiled", [True, False])
def test_decode_correction_uses_device_side_kernel_times_where_recorded(profiled: bool) -> None:
    hw = load_profile("h200-measured", ROOT)
    raw = RawData(Path("."), {"attention": _group("attention", _decode_records(profiled))})
    (table,) = [f for f in fit_model_based(raw, hw) if f.key == "attention_decode"]
    assert ("profiled kernel durations" in table.fit) == profiled
    # the small caches are host-bound under CUDA events (13 us event vs 9 us kernel at batch 1, L 512):
    # with the kernels recorded, the correction there follows the kernel
    rec = next(r for r in _decode_records(True) if r["batch"] == 1 and r["kv_len"] == 512)
    assert decode_kernel_s(rec, hw.launch_gap_s) * 1e6 < 0.8 * rec["time_us"]
    assert decode_kernel_s({k: v for k, v in rec.items() if k != "kernels"}, hw.launch_gap_s) * 1e6 == pytest.approx(rec["time_us"])


def test_new_calibrations_hold_the_groups_their_fits_need() -> None:
    for run in ("D", "E"):
        groups = load_raw(ROOT / "calibration/h200/runs" / run / "raw").groups
        assert {"attention_default", "math_ops", "host_costs", "stream_gaps", "kernel_configs"} <= set(groups)
        rounds = {r.get("run") for r in groups["host_costs"].records if r.get("bench") == "eager_op"}
        assert rounds == {1, 2, 3}


def test_drivers_name_the_number_that_moves_the_steps(tmp_path: Path) -> None:
    doc = yaml.safe_load(MEASURED.read_text())
    doc["host"]["eager_op_us_by_kind"]["gemm"]["value"] *= 1.5
    other = tmp_path / "other.yaml"
    other.write_text(yaml.safe_dump(doc, sort_keys=False))
    a = Calibration("a", tmp_path, MEASURED, {})
    b = Calibration("b", tmp_path, other, {})
    found = drivers(a, b, str(ROOT / "validation/h200/cases.yaml"), tmp_path)
    assert [d.parameter for d in found] == ["host.eager_op_us_by_kind.gemm"]
    assert found[0].max_change > 0.03 and found[0].cases_over > 0


def test_host_cost_rounds_time_every_benchmark_once_per_round(monkeypatch: pytest.MonkeyPatch) -> None:
    from sim.calibrate.gpu import host_costs

    calls: list[str] = []
    monkeypatch.setattr(host_costs, "_per_call", lambda fn, n=300, repeats=5: (calls.append(fn()), float(len(calls)))[1])
    t = host_costs.Timings()
    t.add({"bench": "eager_op", "op": "a"}, host_us_per_op=(lambda: "a", 300))
    t.add({"bench": "compiled_chain", "matmuls": 1}, forward_host_us=(lambda: "f", 200), train_step_host_us=(lambda: "t", 100))
    recs = t.measure(2)
    assert calls == ["a", "f", "t", "a", "f", "t"]
    assert [(r["bench"], r["run"]) for r in recs] == [("eager_op", 1), ("compiled_chain", 1), ("eager_op", 2),
                                                      ("compiled_chain", 2)]
    assert recs[3]["train_step_host_us"] == 6.0


def test_calibrate_all_stops_at_its_budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from sim.calibrate.gpu import calibrate_all

    slow = [sys.executable, "-c", "import time; time.sleep(30)"]
    monkeypatch.setattr(calibrate_all, "steps", lambda out, quick: [slow, [sys.executable, "-c", "pass"]])
    assert calibrate_all.main(["--out", str(tmp_path), "--budget-s", "2"]) == 1
    log = json.loads((tmp_path / "calibrate_all.json").read_text())
    assert log["steps"][0]["rc"] == -9 and log["steps"][1]["skipped"] == "time budget spent"
    assert log["wall_s"] < 20


def test_calibrate_all_runs_the_fit_groups_and_host_rounds() -> None:
    from sim.calibrate.gpu.calibrate_all import steps

    names = [" ".join(cmd[2:]) for cmd in steps("OUT", quick=False)]
    assert any(n.startswith("sim.calibrate.gpu.fit_groups") for n in names)
    assert "sim.calibrate.gpu.host_costs --out OUT --runs 3" in names
    assert "sim.calibrate.gpu.stream_gaps --out OUT --steps 12" in names  # the gap's median over ~180 gaps


def test_quick_calibration_measures_a_subset_and_says_what_it_skips() -> None:
    """--quick: every group a full calibration writes is either measured or listed with the reason the
    base profile keeps its numbers; the fits' inputs that vary most between machines are measured."""
    from sim.calibrate.gpu.calibrate_all import (
        FULL_MICRO_GROUPS,
        QUICK_BUDGET_S,
        QUICK_MICRO_GROUPS,
        QUICK_SKIPS,
        steps,
    )

    quick = [" ".join(cmd[2:]) for cmd in steps("OUT", quick=True)]
    full = [cmd[2] for cmd in steps("OUT", quick=False)]
    measured = set(QUICK_MICRO_GROUPS) | {c.split()[0].rsplit(".", 1)[1] for c in quick if "micro" not in c}
    written_by_full = (set(FULL_MICRO_GROUPS) | {m.rsplit(".", 1)[1] for m in full if not m.endswith(("micro", "fit_groups"))}
                       | {"attention_default", "math_ops", "register_small"})
    assert measured | set(QUICK_SKIPS) == written_by_full and not measured & set(QUICK_SKIPS)
    assert {"host_costs", "kernel_overhead", "copy", "gemm", "stream_gaps", "kernel_configs"} <= measured
    assert QUICK_BUDGET_S <= 90


def test_quick_calibration_defaults_to_its_budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from sim.calibrate.gpu import calibrate_all

    monkeypatch.setattr(calibrate_all, "steps", lambda out, quick: [[sys.executable, "-c", "pass"]])
    assert calibrate_all.main(["--out", str(tmp_path), "--quick"]) == 0
    log = json.loads((tmp_path / "calibrate_all.json").read_text())
    assert log["quick"] and log["budget_s"] == calibrate_all.QUICK_BUDGET_S and "profiler_overhead" in log["skipped_groups"]


def test_a_quick_calibration_fits_over_the_measured_profile(tmp_path: Path) -> None:
    """The groups --quick skips keep measured numbers (h200-measured), not the datasheet's."""
    from sim.commands_calibrate import default_base

    assert default_base(tmp_path, quick=False) == "h200-sxm"
    assert default_base(tmp_path, quick=True) == "h200-measured"
    (tmp_path / "calibrate_all.json").write_text(json.dumps({"steps": [], "quick": True}))
    assert default_base(tmp_path, quick=False) == "h200-measured"  # --from-raw of a quick raw folder
    (tmp_path / "calibrate_all.json").write_text(json.dumps({"steps": [], "quick": False}))
    assert default_base(tmp_path, quick=False) == "h200-sxm"


def test_what_a_full_calibration_no_longer_measures_is_read_by_no_fit(tmp_path: Path,
                                                                     shipped_fit: tuple[str, FitResult]) -> None:
    """The full plan skips the micro groups in FULL_SKIPS and the sustained copy load (wave 11 trim): the
    shipped raw folder without them fits to the same numbers (a fit that starts reading them fails this).
    The shipped folder's fit is the session's (conftest.shipped_fit: with spreads, which leave the values as they are)."""
    import shutil

    from sim.calibrate.fit import calibrate_from_raw
    from sim.calibrate.gpu.calibrate_all import FULL_SKIPS, steps
    from tests.conftest import ROOT

    raw = ROOT / "calibration" / "h200" / "raw"
    base = ROOT / "hardware_profiles" / "h200-sxm.yaml"
    full = [" ".join(cmd[2:]) for cmd in steps("OUT", quick=False)]
    assert "sim.calibrate.gpu.sustained --out OUT --loads gemm" in full
    assert not any(g in full[0].split("--groups ")[1].split()[0].split(",") for g in FULL_SKIPS)
    trimmed = tmp_path / "h200" / "raw"  # beside the raw folder's siblings (the host fits read ../host_context)
    shutil.copytree(raw, trimmed, ignore=shutil.ignore_patterns(*(f"{g}.json" for g in FULL_SKIPS)))
    for sibling in raw.parent.iterdir():
        if sibling.name != "raw":
            (trimmed.parent / sibling.name).symlink_to(sibling)
    doc = json.loads((trimmed / "sustained.json").read_text())
    assert len(doc["records"]) > 1
    doc["records"] = [r for r in doc["records"] if str(r["load"]).startswith("gemm_4096")]
    (trimmed / "sustained.json").write_text(json.dumps(doc))

    _, trimmed_fit = calibrate_from_raw(trimmed, base, tmp_path / "p.yaml", "p", spreads=False)
    _, shipped = shipped_fit
    assert [(v.section, v.key, v.value) for v in trimmed_fit.values] == [(v.section, v.key, v.value) for v in shipped.values]
