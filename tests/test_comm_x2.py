"""The two-GPU profile (h200-nvl2): fitted from committed NCCL measurements on two H200s, and
checked against the sizes and the repeat run the fit did not use."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from sim.calibrate.comm_fit import load_comm, nvl2_profile_yaml
from sim.costmodel.collective import links_of
from sim.costmodel.host import eager_dispatch_s
from sim.costmodel.nccl import measured_busbw, plan_collective
from sim.graph import Op
from sim.hardware import load_profile
from sim.validate.comm import comm_rows, summarize_comm

ROOT = Path(__file__).resolve().parents[1]
COMM = ROOT / "calibration" / "h200x2" / "comm"


def test_committed_profile_is_the_fit_of_the_committed_raw_file() -> None:
    doc = load_comm(COMM / "B" / "comm.json")
    text = nvl2_profile_yaml(doc, load_profile("h200-measured"), "../calibration/h200x2/comm/B/comm.json")
    assert (ROOT / "hardware_profiles" / "h200-nvl2.yaml").read_text() == text


def test_measured_bus_bandwidth_is_interpolated_log_log_and_flat_above_the_largest_size() -> None:
    topo = load_profile("h200-nvl2").fabric
    pts = dict(next(p for name, p, _ in topo.collective_fits if name == "all_reduce"))
    (s0, b0), (s1, b1) = sorted(pts.items())
    mid = (s0 * s1) ** 0.5  # geometric middle: the geometric mean of the two bandwidths
    assert measured_busbw(topo, "all_reduce", mid) == pytest.approx((b0 * b1) ** 0.5, rel=1e-9)
    assert measured_busbw(topo, "all_reduce", 4 * s1) == pytest.approx(b1)
    assert measured_busbw(topo, "all_reduce", s0 / 4) < b0  # NCCL runs fewer channels on smaller messages
    assert measured_busbw(topo, "no_such_collective", s0) is None


def test_no_nvls_where_multicast_is_off_and_ring_at_two_ranks() -> None:
    hw = load_profile("h200-nvl2")
    assert hw.fabric.nvls_busbw_bps == 0
    for size in (1 << 20, 1 << 30):
        plan = plan_collective("all_reduce", size, 2, 1, links_of(hw), hw.fabric)
        assert plan.algorithm != "nvls"
    with pytest.raises(ValueError):
        plan_collective("all_reduce", 1 << 30, 2, 1, links_of(hw), hw.fabric, algorithm="nvls")


def test_a_collective_call_pays_the_measured_torch_distributed_host_cost() -> None:
    hw = load_profile("h200-nvl2")
    op = Op(name="ar", kind="collective", attrs={"collective": "all_to_all", "bytes": 4096.0, "ranks": 2})
    assert eager_dispatch_s(op, hw) == pytest.approx(hw.fabric.collective_host_s("all_to_all"))
    bare = dataclasses.replace(hw, topology=None)
    assert eager_dispatch_s(op, bare) == pytest.approx(hw.eager_op_by_kind_s["collective"])


def test_held_out_collectives_stay_within_the_tripwires() -> None:
    """Regression tripwires (today's figures + margin), not accuracy goals: device-bound calls
    of held-out sizes and of the repeat run (median 3 %), host-bound calls (median 7 %)."""
    rows = comm_rows(COMM)
    held = [r for r in rows if r.split != "fit"]
    assert len(held) >= 90
    device = sorted(abs(r.error) for r in held if not r.host_bound)
    host = sorted(abs(r.error) for r in held if r.host_bound)
    assert device[len(device) // 2] < 0.06 and device[-1] < 0.15
    assert host[len(host) // 2] < 0.12
    assert {s.split for s in summarize_comm(rows)} == {"fit", "held-out"}


def test_the_release_loss_is_fitted_into_the_overlay_only_when_asked() -> None:
    """topology.release_loss_units (issue 20): fitted on the single-GPU gemm_release calibration data with
    its provenance and spread; the shipped h200-nvl2 leaves it out (the rule stays off: with it the
    device-bound contention medians cross their tripwires, docs/communication.md)."""
    import json

    import yaml

    from sim.calibrate.gemm_release_fit import fit_release_loss, release_cells

    release = ROOT / "calibration" / "h200" / "raw" / "gemm_release_gated" / "gemm_release.json"
    rdoc = json.loads(release.read_text())
    base = load_profile("h200-measured")
    text = nvl2_profile_yaml(load_comm(COMM / "B" / "comm.json"), base, "../calibration/h200x2/comm/B/comm.json",
                             release=(rdoc, "../calibration/h200/raw/gemm_release_gated/gemm_release.json"))
    entry = yaml.safe_load(text)["topology"]["release_loss_units"]
    fit = fit_release_loss(release_cells(rdoc), base)
    assert fit is not None
    assert entry["value"] == round(fit.value, 2) and entry["source"] == "measured" and entry["n"] == 60
    assert entry["spread"][0] <= entry["value"] <= entry["spread"][1]
    assert "release_loss_units" not in (ROOT / "hardware_profiles" / "h200-nvl2.yaml").read_text()
    assert load_profile("h200-nvl2").fabric.release_loss_units is None
