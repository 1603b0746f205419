"""Communication in the engine: rendezvous, link sharing, overlap and exposed communication, the 8-rank
DP scenario (the collective's pricing: tests/costmodel/test_collective.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import MappingProxyType

import pytest

from sim.costmodel import KernelCost
from sim.costmodel.host import host_costs
from sim.engine import simulate_ranks
from sim.graph import Graph, Op, Tensor
from sim.hardware import Hardware
from sim.metrics import comm_metrics
from sim.report.perfetto import trace_events
from sim.run import load_scenario, run_scenario
from sim.topology import Layout
from tests.conftest import ROOT

US = 1e-6
GIB = 1024**3



# -- engine: rendezvous, sharing, overlap ---------------------------------------------------
def _comm_cost(transfer_us: float, latency_us: float = 8.0, sm: float = 0.1, bw: float = 0.1,
               intra: float = 1.0) -> KernelCost:
    t = (2.0 + latency_us + transfer_us) * US
    return KernelCost(time_s=t, compute_s=0.0, memory_s=t - 2 * US, fixed_s=2 * US, limiter="link", category="comm",
                      hbm_bytes=0.0, bw_demand=bw, sm_demand=sm, detail=MappingProxyType(
                          {"latency_s": latency_us * US, "transfer_s": transfer_us * US, "intra_share": intra,
                           "net_share": 0.0, "algorithm": "ring", "protocol": "simple"}))


def _compute_cost(us: float, sm: float = 0.5, bw: float = 0.2) -> KernelCost:
    return KernelCost(time_s=us * US, compute_s=us * US, memory_s=0.0, fixed_s=0.0, limiter="tensor_core",
                      category="compute", hbm_bytes=0.0, bw_demand=bw, sm_demand=sm)


def _graph(ops: list[Op]) -> Graph:
    tensors = {t: Tensor(t, (1024,), "bf16") for o in ops for t in o.reads + o.writes}
    return Graph("t", "training", MappingProxyType({}), MappingProxyType(tensors), tuple(ops))


def _run(testgpu: Hardware, compute_us: float, comm: KernelCost | None, ranks: int = 2,
         delays: list[float] | None = None, compute: KernelCost | None = None):  # type: ignore[no-untyped-def]
    ops = [Op(name="gemm", kind="gemm", reads=("a",), writes=("b",), stream=0)]
    costs: list[KernelCost | None] = [compute or _compute_cost(compute_us)]
    if comm is not None:
        ops.append(Op(name="ar", kind="collective", reads=("g",), writes=("g",), stream=1,
                      attrs=MappingProxyType({"collective": "all_reduce", "bytes": 1.0})))
        costs.append(comm)
    g = _graph(ops)
    members = tuple(range(ranks))
    groups = [[members if o.kind == "collective" else None for o in ops] for _ in range(ranks)]
    return simulate_ranks([g] * ranks, [costs] * ranks, [host_costs(testgpu)] * ranks, groups, [0] * ranks,
                          [d * US for d in delays] if delays else None)


def test_collective_hidden_behind_compute_costs_nothing(testgpu: Hardware) -> None:
    # Host: 10 µs dispatch per op, 5 µs launch latency → the GEMM runs 15–115 µs, the all-reduce 25–65 µs.
    without = _run(testgpu, 100, None)
    with_comm = _run(testgpu, 100, _comm_cost(30))
    assert with_comm[0].end_s == pytest.approx(without[0].end_s, rel=1e-12)
    assert with_comm[0].end_s == pytest.approx(115 * US, rel=1e-9)
    cm = comm_metrics(with_comm[0])
    assert cm.comm_s == pytest.approx(40 * US, rel=1e-9)
    assert cm.exposed_s == pytest.approx(0.0, abs=1e-12)


def test_collective_exposed_when_compute_is_shorter(testgpu: Hardware) -> None:
    traces = _run(testgpu, 20, _comm_cost(30))  # GEMM 15–35 µs, all-reduce 25–65 µs
    assert traces[0].end_s == pytest.approx(65 * US, rel=1e-9)
    cm = comm_metrics(traces[0])
    assert cm.exposed_s == pytest.approx(30 * US, rel=1e-9)
    assert cm.collectives[0].exposed_s == pytest.approx(30 * US, rel=1e-9)


def test_collective_waits_for_a_machine_filling_kernel(testgpu: Hardware) -> None:
    # A GEMM whose blocks fill every SM (demand 1.0) runs 15–115 µs; the all-reduce, ready at 25 µs, gets
    # no SM for its CTAs until the GEMM's blocks are through (the block scheduler serves the earlier
    # kernel first): it moves its 30 µs (+ 10 µs latency) from 115 µs on, the GEMM is not slowed.
    traces = _run(testgpu, 100, _comm_cost(30, sm=0.25), compute=_compute_cost(100, sm=1.0))
    assert traces[0].end_s == pytest.approx(155 * US, rel=1e-9)
    gemm = next(iv for iv in traces[0].kernels() if iv.name == "gemm")
    assert gemm.end_s == pytest.approx(115 * US, rel=1e-9)


def _run_ops(testgpu: Hardware, ops: list[Op], costs: list[KernelCost | None]):  # type: ignore[no-untyped-def]
    g = _graph(ops)
    groups = [[(0, 1) if o.kind == "collective" else None for o in ops] for _ in range(2)]
    return simulate_ranks([g] * 2, [costs] * 2, [host_costs(testgpu)] * 2, groups, [0, 0])


def _ar(name: str = "ar", reads: tuple[str, ...] = ("g",)) -> Op:
    return Op(name=name, kind="collective", reads=reads, writes=("g",), stream=1,
              attrs=MappingProxyType({"collective": "all_reduce", "bytes": 1.0}))


def test_kernel_beside_held_ctas_runs_on_the_sms_left(testgpu: Hardware) -> None:
    # The all-reduce is issued first (ready at 15 µs, latency 10, transfer 30: holds 0.25 of the SMs
    # 15–55 µs); the GEMM (100 µs alone, every SM) starts at 25 µs on the 0.75 left: 30 µs at 0.75
    # = 22.5 µs of progress by 55, then the remaining 77.5 µs alone → ends at 132.5 µs.
    ops = [_ar(), Op(name="gemm", kind="gemm", reads=("a",), writes=("b",), stream=0)]
    traces = _run_ops(testgpu, ops, [_comm_cost(30, sm=0.25), _compute_cost(100, sm=1.0)])
    gemm = next(iv for iv in traces[0].kernels() if iv.name == "gemm")
    assert gemm.end_s == pytest.approx(132.5 * US, rel=1e-9)


def test_collective_waits_for_the_kernels_running_when_it_became_ready_not_their_successors(
        testgpu: Hardware) -> None:
    # gemm1 (every SM) 15–115 µs; the all-reduce is ready at 25 µs and waits for gemm1; gemm2, behind
    # gemm1 on its stream, starts at 115 µs like the all-reduce: the all-reduce was first, so it takes
    # its SMs (transfer 115+10 .. 155) and gemm2 runs on what is left meanwhile.
    ops = [Op(name="gemm1", kind="gemm", reads=("a",), writes=("b",), stream=0), _ar(),
           Op(name="gemm2", kind="gemm", reads=("b",), writes=("c",), stream=0)]
    traces = _run_ops(testgpu, ops, [_compute_cost(100, sm=1.0), _comm_cost(30, sm=0.25), _compute_cost(100, sm=1.0)])
    ar = next(iv for iv in traces[0].intervals if iv.name == "ar" and iv.cat == "comm")
    assert ar.end_s == pytest.approx(155 * US, rel=1e-9)
    gemm2 = next(iv for iv in traces[0].kernels() if iv.name == "gemm2")
    assert gemm2.end_s == pytest.approx((115 + 40 + (100 - 40 * 0.75)) * US, rel=1e-9)


def test_oversubscribed_hbm_is_shared_by_the_sms_that_ask(testgpu: Hardware) -> None:
    # A bandwidth-bound kernel (HBM 0.9, half the SMs: not filling) 15–215 µs and an all-reduce whose
    # transfer streams HBM at 0.3 on 0.1 of the SMs: 1.2 asked for. The collective's CTAs get their SM
    # share, 0.1 (a third of what they ask: the 30 µs transfer from 35 µs takes 90 µs), the kernel the
    # 0.9 it asks for (not slowed).
    ops = [Op(name="copy", kind="copy", reads=("a",), writes=("b",), stream=0), _ar()]
    traces = _run_ops(testgpu, ops, [_compute_cost(200, sm=0.5, bw=0.9), _comm_cost(30, bw=0.3, sm=0.1)])
    ar = next(iv for iv in traces[0].kernels() if iv.name == "ar")
    assert ar.end_s == pytest.approx((35 + 90) * US, rel=1e-9)
    copy = next(iv for iv in traces[0].kernels() if iv.name == "copy")
    assert copy.end_s == pytest.approx(215 * US, rel=1e-9)


def test_kernels_and_a_transfer_asking_more_than_their_sm_share_split_hbm_by_sms(testgpu: Hardware) -> None:
    # Kernel: HBM 1.0 on every SM it can get; transfer: HBM 0.4 on 0.25 of the SMs. Shares 0.75 / 0.25:
    # the transfer goes at 0.25 / 0.4 = 0.625 (30 µs -> 48 µs, 35–83 µs), the kernel at 0.75 meanwhile
    # (48 µs x 0.75 = 36 µs of progress): 100 µs alone from 15 µs ends at 15 + 20 + 48 + 44 = 127 µs.
    ops = [Op(name="copy", kind="copy", reads=("a",), writes=("b",), stream=0), _ar()]
    traces = _run_ops(testgpu, ops, [_compute_cost(100, sm=0.5, bw=1.0), _comm_cost(30, bw=0.4, sm=0.25)])
    ar = next(iv for iv in traces[0].kernels() if iv.name == "ar")
    assert ar.end_s == pytest.approx(83 * US, rel=1e-9)
    copy = next(iv for iv in traces[0].kernels() if iv.name == "copy")
    assert copy.end_s == pytest.approx(127 * US, rel=1e-9)


def test_ranks_rendezvous_and_a_late_rank_delays_the_others(testgpu: Hardware) -> None:
    on_time = _run(testgpu, 20, _comm_cost(30))
    late = _run(testgpu, 20, _comm_cost(30), delays=[0.0, 50.0])
    for r in (0, 1):
        assert late[r].end_s == pytest.approx(on_time[r].end_s + 50 * US, rel=1e-9)
    waits = [comm_metrics(t).wait_s for t in late]
    assert waits[0] == pytest.approx(50 * US, rel=1e-9) and waits[1] == pytest.approx(0.0, abs=1e-12)
    iv0 = next(iv for iv in late[0].intervals if iv.name == "ar" and iv.cat == "comm")
    iv1 = next(iv for iv in late[1].intervals if iv.name == "ar" and iv.cat == "comm")
    assert iv0.end_s == iv1.end_s  # they finish together


def test_two_collectives_on_the_same_links_share_them(testgpu: Hardware) -> None:
    ops = [Op(name=f"ar{i}", kind="collective", reads=(f"g{i}",), writes=(f"g{i}",), stream=1 + i,
              attrs=MappingProxyType({"collective": "all_reduce", "bytes": 1.0})) for i in range(2)]
    g = _graph(ops)
    members = (0, 1)
    cost = _comm_cost(100, latency_us=0.0)
    one = simulate_ranks([_graph(ops[:1])] * 2, [[cost]] * 2, [host_costs(testgpu)] * 2, [[members]] * 2, [0, 0])
    two = simulate_ranks([g] * 2, [[cost, cost]] * 2, [host_costs(testgpu)] * 2, [[members, members]] * 2, [0, 0])
    t_one = one[0].end_s - 15 * US
    # The second starts 10 µs later; sharing halves both rates while they overlap, so the links
    # carry 200 µs of work back to back from the first transfer's start (17 µs).
    assert two[0].end_s == pytest.approx(17 * US + 200 * US, rel=1e-9)
    assert t_one == pytest.approx(102 * US, rel=1e-9)
    half_links = simulate_ranks([g] * 2, [[_comm_cost(100, latency_us=0.0, intra=0.5)] * 2] * 2, [host_costs(testgpu)] * 2,
                                [[members, members]] * 2, [0, 0])
    assert half_links[0].end_s == pytest.approx(15 * US + 2 * US + 100 * US + 10 * US, rel=1e-9)  # no contention


def test_mismatched_collective_deadlock_is_reported(testgpu: Hardware) -> None:
    ops = [Op(name="ar", kind="collective", reads=("g",), writes=("g",), stream=1,
              attrs=MappingProxyType({"collective": "all_reduce", "bytes": 1.0}))]
    g = _graph(ops)
    with pytest.raises(RuntimeError, match="never finished"):
        simulate_ranks([g, g], [[_comm_cost(10)]] * 2, [host_costs(testgpu)] * 2, [[(0, 1, 2)]] * 2, [0, 0])


def test_layout_groups() -> None:
    lay = Layout(ranks=16, data=2, tensor=4, pipeline=2)
    assert lay.members(5, "tensor") == (4, 5, 6, 7)
    assert lay.members(5, "data") == (1, 5)
    assert lay.members(5, "pipeline") == (5, 13)
    assert lay.members(5, "world") == tuple(range(16))
    with pytest.raises(ValueError):
        Layout(ranks=8, data=3)


# -- the 8-rank data-parallel scenario ------------------------------------------------------
@pytest.fixture(scope="module")
def dp_run() -> tuple[dict, dict]:  # type: ignore[type-arg]
    scn = load_scenario(ROOT / "scenarios" / "dp_mlp_8ranks.yaml")
    return run_scenario(scn, keep_traces=True)


def test_dp_scenario_reports_exposed_communication(dp_run) -> None:  # type: ignore[no-untyped-def]
    result, _ = dp_run
    variants = {v["name"]: v for v in result["hardware"][0]["variants"]}
    for base, flat in zip(variants["baseline"]["buckets"], variants["no_overlap"]["buckets"], strict=True):
        c, f = base["comm"], flat["comm"]
        assert c["ranks"] == 8 and len(c["rank_time_us"]) == 8
        assert len(c["collectives"]) == 8 and len(f["collectives"]) == 1
        assert 0 < c["exposed_comm_us"] < c["comm_time_us"]
        assert f["exposed_comm_us"] == pytest.approx(f["comm_time_us"], rel=1e-9)  # nothing to hide behind
        assert c["exposed_comm_us"] + c["hidden_comm_us"] == pytest.approx(c["comm_time_us"], rel=1e-9)
        assert base["time_us"] < flat["time_us"]  # overlap pays
        assert sum(base["breakdown_us"].values()) == pytest.approx(base["time_us"], rel=1e-9)
    json.dumps(result)


def test_dp_scenario_trace_has_one_process_per_rank(dp_run) -> None:  # type: ignore[no-untyped-def]
    _, traces = dp_run
    chosen = [(f"{hw}/{v}", t) for (hw, v, b), t in traces.items() if b == 0]
    events = trace_events(chosen)["traceEvents"]
    names = [e["args"]["name"] for e in events if e.get("name") == "process_name"]
    assert len(names) == 2 * 8 and names[0].endswith("/ rank 0") and names[7].endswith("/ rank 7")
    comm = [e for e in events if e.get("cat") == "comm"]
    assert comm and all("wait_us" in e["args"] and e["args"]["algorithm"] for e in comm)


def test_straggler_and_layout_knobs(tmp_path: Path) -> None:
    doc = (ROOT / "scenarios" / "dp_mlp_8ranks.yaml").read_text()
    doc = doc.replace("workload: ../workloads/mlp_dp.yaml", f"workload: {ROOT / 'workloads' / 'mlp_dp.yaml'}")
    doc += "parameters: {straggler_slowdown: 1.2, straggler_delay_us: 100}\ndistribution: [{params: {tokens: 4096}, weight: 1}]\n"
    (tmp_path / "s.yaml").write_text(doc)
    slow, _ = run_scenario(load_scenario(tmp_path / "s.yaml"))
    fast, _ = run_scenario(load_scenario(ROOT / "scenarios" / "dp_mlp_8ranks.yaml"))
    b_slow = slow["hardware"][0]["variants"][0]["buckets"][0]
    b_fast = next(b for b in fast["hardware"][0]["variants"][0]["buckets"] if b["params"]["tokens"] == 4096)
    assert b_slow["comm"]["critical_rank"] == 5
    assert b_slow["time_us"] > b_fast["time_us"] * 1.1
    ranks = b_slow["comm"]["rank_time_us"]
    assert max(ranks) == ranks[5]
    # Everyone else waited for rank 5 at the buckets.
    assert b_slow["comm"]["rendezvous_wait_us"] == 0.0 or b_slow["comm"]["critical_rank"] == 5
    assert math.isfinite(b_slow["comm"]["exposed_comm_us"])


def test_dp_kernel_only_gain_prices_collectives_over_the_group(dp_run) -> None:  # type: ignore[no-untyped-def]
    """The no_overlap variant's kernel-only gain compares the collectives' durations on 8 ranks (one large
    all-reduce vs 8 per-layer ones: about even), not their one-rank launch cost (which read +87.5 %)."""
    result, traces = dp_run
    variants = {v["name"]: v for v in result["hardware"][0]["variants"]}
    micro = variants["no_overlap"]["micro"]
    hw = result["hardware"][0]["name"]
    per_bucket = []
    for b in range(len(variants["baseline"]["buckets"])):
        t_base = traces[(hw, "baseline", b)]
        t_flat = traces[(hw, "no_overlap", b)]
        base_comm = sum(c.time_s for o, c in zip(t_base.graph.ops, t_base.costs, strict=True) if o.kind == "collective")
        flat_comm = sum(c.time_s for o, c in zip(t_flat.graph.ops, t_flat.costs, strict=True) if o.kind == "collective")
        per_bucket.append((base_comm, flat_comm))
    weights = [bk["weight"] for bk in variants["baseline"]["buckets"]]
    rep = sum(w * b for w, (b, _) in zip(weights, per_bucket, strict=True)) / sum(weights)
    new = sum(w * f for w, (_, f) in zip(weights, per_bucket, strict=True)) / sum(weights)
    assert micro["replaced_kernel_time_us"] == pytest.approx(rep * 1e6, rel=1e-9)
    assert micro["new_kernel_time_us"] == pytest.approx(new * 1e6, rel=1e-9)
    assert rep > 8 * 100e-6  # eight all-reduces of ~270 MB each on 8 ranks: each far above a launch
    assert abs(micro["gain"]) < 0.2
