"""Host share per bucket in the run JSON, and `advise` saying when a decision hinges on host time."""

from __future__ import annotations

from typing import Any

import pytest

from sim.advise import _host_hinge, advise
from sim.run import load_scenario, run_scenario
from tests.conftest import ROOT


def _variant(result: dict[str, Any], name: str) -> dict[str, Any]:
    return next(v for v in result["hardware"][0]["variants"] if v["name"] == name)


def test_buckets_report_host_busy_time_and_share() -> None:
    scn = load_scenario(ROOT / "scenarios" / "serving_decode.yaml", ["h200-sxm"])
    result, _ = run_scenario(scn)
    base, graph = _variant(result, "baseline"), _variant(result, "cuda_graph")
    for v in (base, graph):
        for b in v["buckets"]:
            assert 0.0 < b["host_busy_us"] <= b["time_us"] * (1 + 1e-9)
            assert b["host_share"] == pytest.approx(b["host_busy_us"] / b["time_us"])
    # eager decode at batch 1 is host-bound; its CUDA graph replaces the launches by one replay
    assert base["buckets"][0]["host_share"] > 0.5
    assert graph["buckets"][0]["host_busy_us"] < 0.5 * base["buckets"][0]["host_busy_us"]


def test_advise_says_when_the_decision_hinges_on_host_time() -> None:
    res = advise(ROOT / "scenarios" / "serving_decode.yaml", ["h200-sxm"])
    v = next(x for x in res["hardware"][0]["variants"] if x["name"] == "cuda_graph")
    codes = [r["code"] for r in v["reasons"]]
    assert "host_bound" in codes
    assert v["figures"]["base_host_share"] > 0.5 > v["figures"]["variant_host_share"]


def test_no_host_reason_for_a_device_bound_kernel_change() -> None:
    base = [{"time_us": 1000.0, "host_busy_us": 100.0}, {"time_us": 2000.0, "host_busy_us": 100.0}]
    faster_kernels = [{"time_us": 800.0, "host_busy_us": 100.0}, {"time_us": 1700.0, "host_busy_us": 100.0}]
    assert _host_hinge([1.0, 1.0], base, faster_kernels) is None
    fewer_launches = [{"time_us": 950.0, "host_busy_us": 40.0}, {"time_us": 1950.0, "host_busy_us": 40.0}]
    hinge = _host_hinge([1.0, 1.0], base, fewer_launches)
    assert hinge is not None and hinge[0][0] == "host_bound"
    host_bound = [{"time_us": 1000.0, "host_busy_us": 900.0}]
    assert _host_hinge([1.0], host_bound, [{"time_us": 990.0, "host_busy_us": 900.0}]) is not None
