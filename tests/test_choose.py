"""`choose` variants: kernelsim picks the fastest path per bucket, among its own `paths` and the
scenario's other variants (`from: all` or names)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from sim.errors import InputError
from sim.run import load_scenario, run_scenario
from tests.conftest import ROOT

SEED = ROOT / "scenarios" / "bias_gelu_dropout.yaml"


def test_seed_dispatch_auto_considers_every_path() -> None:
    scn = load_scenario(SEED, hardware_override=["h200-measured"])
    result, _ = run_scenario(scn)
    variants = {v["name"]: v for v in result["hardware"][0]["variants"]}
    auto = variants.pop("dispatch_auto")
    margin = scn.spec.variants[-1].choose.min_gain  # type: ignore[union-attr]
    for i, bk in enumerate(auto["buckets"]):
        base = variants["baseline"]["buckets"][i]["time_us"]
        others = {name: v["buckets"][i]["time_us"] for name, v in variants.items() if name != "baseline"}
        best = min(others, key=lambda n: others[n])
        if others[best] <= base * (1 - margin):
            assert bk["path"] == best
            assert bk["time_us"] == pytest.approx(others[best], rel=1e-9)
        else:
            assert bk["path"] == "fallback"
            assert bk["time_us"] == pytest.approx(base, rel=1e-9)
    # The per-bucket policy advise finds (eager below 4096 tokens, compiled above) beats every single path.
    paths = {int(bk["params"]["tokens"]): bk["path"] for bk in auto["buckets"]}
    assert all(p == ("compiled" if t >= 4096 else "fallback") for t, p in paths.items())
    assert auto["weighted_time_us"] < min(v["weighted_time_us"] for v in variants.values())


def _scenario(tmp_path: Path, choose: dict) -> Path:  # type: ignore[type-arg]
    doc = yaml.safe_load(SEED.read_text())
    doc["workload"] = str(ROOT / "workloads" / "mlp_bias_gelu_dropout.yaml")
    doc["hardware"] = ["h200-measured"]
    doc["variants"] = [v for v in doc["variants"] if v["name"] in ("compiled", "fused_b512")]
    doc["variants"].append({"name": "auto", "choose": choose})
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_choose_from_named_variants(tmp_path: Path) -> None:
    scn = load_scenario(_scenario(tmp_path, {"from": ["fused_b512"], "min_gain": 0.0}))
    result, _ = run_scenario(scn)
    auto = next(v for v in result["hardware"][0]["variants"] if v["name"] == "auto")
    assert {bk["path"] for bk in auto["buckets"]} <= {"fused_b512", "fallback"}


@pytest.mark.parametrize(("choose", "where", "problem"), [
    ({"from": ["nope"]}, r"variants\[2\]\.choose\.from\[0\]", "unknown variant"),
    ({"from": ["auto"]}, r"variants\[2\]\.choose\.from\[0\]", "unknown variant"),
    ({}, r"variants\[2\]\.choose", "give the candidates"),
])
def test_choose_errors(tmp_path: Path, choose: dict, where: str, problem: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(InputError, match=f"{where}.*{problem}|{problem}.*{where}"):
        load_scenario(_scenario(tmp_path, choose))


def test_choose_variant_cannot_be_a_candidate(tmp_path: Path) -> None:
    path = _scenario(tmp_path, {"from": "all"})
    doc = yaml.safe_load(path.read_text())
    doc["variants"].append({"name": "auto2", "choose": {"from": ["auto"]}})
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    with pytest.raises(InputError, match=r"variants\[3\]\.choose\.from\[0\].*cannot be a candidate"):
        load_scenario(path)


def test_choose_on_several_ranks_compares_whole_steps(tmp_path: Path) -> None:
    """On a data-parallel workload a candidate is timed on every rank (its collectives over the group): one
    all-reduce after the backward looks cheaper than eight on one rank (launch costs only), and loses on eight."""
    doc = yaml.safe_load((ROOT / "scenarios" / "dp_mlp_8ranks.yaml").read_text())
    doc["workload"] = str(ROOT / "workloads" / "mlp_dp.yaml")
    doc["variants"].append({"name": "auto", "choose": {"from": "all"}})
    path = tmp_path / "dp.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    result, _ = run_scenario(load_scenario(path))
    variants = {v["name"]: v for v in result["hardware"][0]["variants"]}
    for auto, base, flat in zip(variants["auto"]["buckets"], variants["baseline"]["buckets"],
                                variants["no_overlap"]["buckets"], strict=True):
        best = "no_overlap" if flat["time_us"] < base["time_us"] else "fallback"
        assert auto["path"] == best
        assert auto["time_us"] == pytest.approx(min(base["time_us"], flat["time_us"]), rel=1e-9)


def test_a_sweep_point_keeps_the_candidates_of_a_choose_variant(tmp_path: Path) -> None:
    """A sweep that selects only `dispatch_auto` still chooses among every other variant."""
    from sim.run import inline_choose
    from sim.sweep import point_scenario

    scn = load_scenario(SEED, hardware_override=["h200-measured"])
    point = point_scenario(scn, scn.hardware[0], {}, ("dispatch_auto",))
    assert [v.name for v in point.spec.variants] == ["dispatch_auto"]
    choose = point.spec.variants[0].choose
    assert choose is not None and not choose.from_
    assert set(choose.paths) == {"compiled", "fused_b512", "fused_b2048", "fused_b8192", "dispatch_aligned"}
    full, _ = run_scenario(scn)
    alone, _ = run_scenario(point)
    auto = {v["name"]: v for v in full["hardware"][0]["variants"]}["dispatch_auto"]
    auto_alone = {v["name"]: v for v in alone["hardware"][0]["variants"]}["dispatch_auto"]
    assert [b["path"] for b in auto_alone["buckets"]] == [b["path"] for b in auto["buckets"]]
    assert auto_alone["weighted_time_us"] == pytest.approx(auto["weighted_time_us"], rel=1e-12)
    assert inline_choose(scn.spec).variants[:-1] == scn.spec.variants[:-1]  # other variants untouched
