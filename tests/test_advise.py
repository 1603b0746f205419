"""`kernelsim advise`: each rule fires on a scenario built for it, from the model's numbers;
critical-path slack; acceptance criteria; the dispatch table and its loader; the CLI."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from sim.advise import advise
from sim.advise.critical import critical_kernels, exposed_times
from sim.advise.kernels import speedup_needed
from sim.advise.rules import VariantFigures, decide
from sim.cli import main
from sim.costmodel.host import host_costs
from sim.costmodel.pricing import price
from sim.dispatch_table import DispatchTable
from sim.engine import simulate
from sim.errors import InputError
from sim.hardware import load_profile
from sim.run import load_scenario
from sim.schema.scenario import AdviceSettings
from tests.conftest import ROOT, workload_doc, write_yaml

FIX = ROOT / "tests" / "fixtures" / "advise"
COUNTER = ROOT / "scenarios" / "counter_case_fusion.yaml"
SEED = ROOT / "scenarios" / "bias_gelu_dropout.yaml"


def _variant(result: dict[str, Any], name: str, hw: int = 0) -> dict[str, Any]:
    return next(v for v in result["hardware"][hw]["variants"] if v["name"] == name)


@pytest.fixture(scope="module")
def counter() -> dict[str, Any]:
    return advise(COUNTER)


def test_counter_case_fuses_on_every_profile(counter: dict[str, Any]) -> None:
    assert counter["schema"] == "kernelsim.advice/v1"
    for hi, hw in enumerate(counter["hardware"]):
        for name in ("fused_chain", "fused_aligned"):
            v = _variant(counter, name, hi)
            assert v["decision"] == "fuse", (hw["name"], v["summary"])
            assert v["kind"] == "fusion"
            f = v["figures"]
            assert f["step_gain"] >= counter["min_gain"] and f["coverage"] >= 0.8
            assert f["hbm_bytes"] < 0.6 * f["baseline_hbm_bytes"]  # the big intermediates are gone
        assert hw["recommendation"]["variant"] == "fused_chain"


def test_micro_gain_large_but_step_gain_small_dispatches_by_bucket() -> None:
    res = advise(FIX / "micro_vs_step.yaml")
    v = _variant(res, "fused_pair")
    f = v["figures"]
    assert f["micro_gain"] > 0.3 and f["step_gain"] < 0.1  # microbenchmark vs relay team
    assert f["worst_bucket_gain"] < -0.005
    assert v["decision"] == "dispatch_by_bucket", v["summary"]
    take = {b["name"]: b["take"] for b in v["buckets"]}
    assert take == {"tokens=128": False, "tokens=256": False, "tokens=4096": True, "tokens=16384": True}
    # The chosen buckets are exactly those that gain: the decision follows the per-bucket numbers.
    for b in v["buckets"]:
        assert b["take"] == (b["gain"] >= res["settings"]["dispatch_margin"])
    acc = v["acceptance"]
    assert acc["gain_vs_baseline"] == pytest.approx(f["dispatched_gain"])
    assert acc["coverage"] == pytest.approx(0.7) and acc["fallback_rate"] == pytest.approx(0.3)
    assert all(r["expected_gain"] >= 0 for r in acc["buckets"])


def test_small_hotspot_is_not_worth_a_kernel() -> None:
    res = advise(FIX / "small_hotspot.yaml")
    v = _variant(res, "faster_scale")
    assert v["figures"]["micro_gain"] > 0.5  # the new kernel itself is much faster
    assert v["figures"]["hotspot_exposed_share"] < 0.03
    assert v["decision"] == "dont_write"
    assert v["reasons"][0]["code"] == "hotspot_too_small"
    assert res["hardware"][0]["recommendation"]["variant"] is None


def test_gemm_near_its_ceiling_keeps_the_library() -> None:
    res = advise(FIX / "near_ceiling.yaml")
    v = _variant(res, "custom_gemm")
    assert v["figures"]["step_gain"] > 0.01  # the claimed efficiency would gain, but beyond the ceiling
    assert v["figures"]["attainable_headroom"] <= res["settings"]["near_ceiling_headroom"]
    assert v["decision"] == "keep_library"
    assert v["reasons"][0]["code"] == "library_near_ceiling"
    hot = res["hardware"][0]["hot_kernels"][0]
    assert hot["name"] == "wgrad" and hot["limiter"] == "tensor_core"
    assert 1.0 < hot["headroom"] < 1.5


def test_frequent_misaligned_shape_is_specialized() -> None:
    res = advise(FIX / "misaligned_specialize.yaml")
    v = _variant(res, "pad_k")
    assert v["kind"] == "specialize"
    assert v["decision"] == "specialize", v["summary"]
    assert [b["name"] for b in v["buckets"] if b["take"]] == ["tokens=4100"]
    assert next(b for b in v["buckets"] if b["name"] == "tokens=4100")["gain"] > 0.1
    table = res["hardware"][0]["recommendation"]["dispatch_table"]
    dt = DispatchTable.from_dict({"schema": "kernelsim.dispatch/v1", "tables": [table]})
    assert dt.lookup({"tokens": 4100}) == "pad_k"
    assert dt.lookup({"tokens": 4096}) == "baseline"
    assert dt.lookup({"tokens": 12345}) == "baseline"  # unseen shapes take the library path


def test_seed_case_on_measured_h200() -> None:
    res = advise(SEED, ["h200-measured"])
    hw = res["hardware"][0]
    assert hw["baseline"]["dominant"] == "compute"
    for name in ("fused_b512", "fused_b2048", "fused_b8192", "dispatch_aligned"):
        assert _variant(res, name)["decision"] == "dont_write"
    assert _variant(res, "compiled")["decision"] == "dispatch_by_bucket"


def _figs(**kw: Any) -> VariantFigures:
    base: dict[str, Any] = dict(
        name="v", kinds=("fusion",), weights=(0.5, 0.5), base_s=(1.0, 1.0), var_s=(0.9, 0.9), on_new_path=(True, True),
        micro_gain=0.5, replaced_share=0.3, replaced_exposed_share=0.3, replaced_time_s=0.3, replaced_roofline_s=0.1,
        replaced_attainable_s=0.12, new_roofline_s=0.05)
    base.update(kw)
    return VariantFigures(**base)


def test_rules_follow_numbers_not_names() -> None:
    s = AdviceSettings()
    assert decide(_figs(), 0.01, s).decision == "fuse"
    assert decide(_figs(name="dont_write_me"), 0.01, s).decision == "fuse"
    # One bucket loses: dispatch by bucket, the winner only.
    d = decide(_figs(var_s=(0.9, 1.05)), 0.01, s)
    assert d.decision == "dispatch_by_bucket" and d.chosen == (True, False)
    # Below the minimum gain everywhere.
    d = decide(_figs(var_s=(0.999, 0.999)), 0.01, s)
    assert d.decision == "dont_write" and d.reasons[0][0] == "below_min_gain"
    # A maintenance cost raises the bar.
    assert decide(_figs(), 0.01, AdviceSettings(maintenance_cost_gain=0.2)).decision == "dont_write"


def test_unstable_distribution_withdraws_the_decision() -> None:
    s = AdviceSettings()
    # Main mix: mostly bucket 0 (gains); alternative: all bucket 1 (loses). Per-bucket dispatch holds.
    f = _figs(weights=(0.9, 0.1), var_s=(0.8, 1.004),
              distributions={"other": ((0.0, 1.0), (1.0, 1.0), (0.8, 1.004))})
    d = decide(f, 0.01, s)
    assert d.decision == "dont_write" and d.reasons[0][0] == "distribution_unstable"
    assert d.figures["gain_under:other"] == pytest.approx(-0.004)
    # If the alternative still has some of the winning bucket, dispatching by bucket is robust.
    f2 = _figs(weights=(0.9, 0.1), var_s=(0.8, 1.004), distributions={"other": ((0.5, 0.5), (1.0, 1.0), (0.8, 1.004))})
    assert decide(f2, 0.01, s).decision == "fuse"


def test_alternative_distributions_from_scenario(tmp_path: Path) -> None:
    doc = yaml.safe_load((FIX / "micro_vs_step.yaml").read_text())
    doc["workload"] = str(ROOT / "workloads" / "many_small_ops.yaml")
    doc["alternative_distributions"] = {"tiny": [{"params": {"tokens": 128}, "weight": 1.0}]}
    res = advise(write_yaml(tmp_path / "s.yaml", doc))
    v = _variant(res, "fused_pair")
    assert "tiny" in res["alternative_distributions"]
    assert v["decision"] == "dont_write" and v["reasons"][0]["code"] == "distribution_unstable"
    doc["alternative_distributions"] = {"bad": [{"params": {"nope": 1}, "weight": 1.0}]}
    with pytest.raises(InputError, match=r"alternative_distributions\.bad\[0\]\.params"):
        advise(write_yaml(tmp_path / "s2.yaml", doc))


def test_amdahl_slack() -> None:
    assert speedup_needed(0.02, 0.05) is None
    assert speedup_needed(0.10, 0.05) == pytest.approx(2.0)
    res = advise(FIX / "near_ceiling.yaml")
    hot = res["hardware"][0]["hot_kernels"]
    for k in hot:
        for s in k["slack"]:
            if s["reachable"] and s["simulated_gain_at_speedup"] is not None:
                # Every kernel here is serial and exposed: the simulation agrees with Amdahl.
                assert s["simulated_gain_at_speedup"] == pytest.approx(s["target_gain"], abs=2e-3)
            if k["exposed_share"] <= s["target_gain"]:
                assert not s["reachable"]


def test_overlapped_kernel_is_not_exposed(tmp_path: Path) -> None:
    """A small kernel on a second stream, fully overlapped by a big GEMM, has no exposed time."""
    ops = [
        {"name": "big", "kind": "gemm", "m": 8192, "n": 8192, "k": 8192, "reads": ["a", "b"], "writes": ["c"]},
        {"name": "side", "kind": "elementwise", "reads": ["x"], "writes": ["y"], "math": {"mul": 1}, "stream": 1},
    ]
    tensors = {"a": {"shape": [8192, 8192], "dtype": "bf16"}, "b": {"shape": [8192, 8192], "dtype": "bf16"},
               "c": {"shape": [8192, 8192], "dtype": "bf16"}, "x": {"shape": [1024, 1024], "dtype": "bf16"},
               "y": {"shape": [1024, 1024], "dtype": "bf16"}}
    wl = write_yaml(tmp_path / "w.yaml", workload_doc(ops, tensors))
    scn = write_yaml(tmp_path / "s.yaml", {"schema": "kernelsim.scenario/v1", "name": "t", "workload": "w.yaml",
                                           "hardware": ["h200-sxm"]})
    assert wl.exists()
    s = load_scenario(scn)
    hw = load_profile("h200-sxm")
    g = s.workload.build(s.workload.params_for(s.buckets[0]))
    tr = simulate(g, price(g, hw), host_costs(hw))
    crit = critical_kernels(tr)
    ex = exposed_times(tr)
    assert g.index("big") in crit
    assert ex[g.index("side")] == 0.0
    assert ex[g.index("big")] > 0.9 * tr.end_s - 1e-4
    res = advise(scn)
    side = next(k for k in res["hardware"][0]["hot_kernels"] if k["name"] == "side")
    assert side["exposed_share"] == 0.0 and side["share"] > 0
    assert all(not sl["reachable"] for sl in side["slack"])


def test_cli_writes_json_and_dispatch_table(tmp_path: Path) -> None:
    out, table = tmp_path / "a.json", tmp_path / "d.json"
    scn = FIX / "misaligned_specialize.yaml"
    assert main(["advise", str(scn), "--json", str(out), "--dispatch-table", str(table), "--quiet"]) == 0
    doc = json.loads(out.read_text())
    assert doc["hardware"][0]["recommendation"]["decision"] == "specialize"
    dt = DispatchTable.load(table)
    assert dt.lookup({"tokens": 4100}, hardware="h200-sxm") == "pad_k"
    assert dt.lookup({"tokens": 4096}) == "baseline"
    with pytest.raises(KeyError):
        dt.lookup({"hidden": 1})
    # Deterministic output.
    out2 = tmp_path / "b.json"
    assert main(["advise", str(scn), "--json", str(out2), "--quiet"]) == 0
    assert out.read_bytes() == out2.read_bytes()


def test_decision_within_the_models_error_is_not_recommended(tmp_path: Path) -> None:
    # The rules say dispatch by bucket (+ a few %), but the 90 % band of that gain includes zero.
    table = tmp_path / "d.json"
    assert main(["advise", str(FIX / "micro_vs_step.yaml"), "--json", str(tmp_path / "a.json"),
                 "--dispatch-table", str(table), "--quiet"]) == 0
    doc = json.loads((tmp_path / "a.json").read_text())
    v = _variant(doc, "fused_pair")
    assert v["decision"] == "dispatch_by_bucket" and v["within_error"]
    lo, hi = v["gain_interval"]
    assert lo < 0 < hi
    assert v["reasons"][0]["code"] == "within_error" and "measure before deciding" in v["reasons"][0]["text"]
    rec = doc["hardware"][0]["recommendation"]
    assert rec["decision"] == "measure_first" and rec["variant"] is None and "fused_pair" in rec["text"]
    assert DispatchTable.load(table).lookup({"tokens": 4096}, hardware="h200-sxm") == "baseline"


def test_positive_decisions_outside_the_band_are_recommended(counter: dict[str, Any]) -> None:
    for hw in counter["hardware"]:
        v = _variant(counter, "fused_chain", counter["hardware"].index(hw))
        assert not v["within_error"] and v["gain_interval"][0] > 0


def test_cli_prints_plain_language(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["advise", str(COUNTER), "--hardware", "h200-sxm"]) == 0
    text = capsys.readouterr().out
    assert "Where the time goes" in text and "fused_chain: fuse" in text and "Acceptance criteria" in text


def test_cli_bad_input_exits_2_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = yaml.safe_load(COUNTER.read_text())
    doc["workload"] = str(ROOT / "workloads" / "many_small_ops.yaml")
    bad = copy.deepcopy(doc)
    bad["advice"] = {"min_coverage": 2}
    out = tmp_path / "a.json"
    path = write_yaml(tmp_path / "bad.yaml", bad)
    assert main(["advise", str(path), "--json", str(out)]) == 2
    err = capsys.readouterr().err
    assert "bad.yaml" in err and "advice.min_coverage" in err
    assert not out.exists()
    assert main(["advise", str(tmp_path / "missing.yaml"), "--json", str(out)]) == 2
    assert not out.exists()


def test_dispatch_table_loader_rejects_other_files(tmp_path: Path) -> None:
    p = tmp_path / "x.json"
    p.write_text(json.dumps({"schema": "kernelsim.run/v1"}))
    with pytest.raises(InputError, match="schema"):
        DispatchTable.load(p)
    p.write_text(json.dumps({"schema": "kernelsim.dispatch/v1", "tables": [{"hardware": "h"}]}))
    with pytest.raises(InputError, match=r"tables\[0\]"):
        DispatchTable.load(p)


@pytest.mark.parametrize("path", sorted((ROOT / "scenarios").glob("*.yaml")), ids=lambda p: p.stem)
def test_shipped_scenarios_advise(path: Path) -> None:
    res = advise(path)
    for hw in res["hardware"]:
        assert hw["hot_kernels"]
        for v in hw["variants"]:
            assert v["decision"] in ("fuse", "specialize", "dispatch_by_bucket", "use_library", "adopt",
                                     "keep_library", "dont_write")
            assert v["reasons"]
