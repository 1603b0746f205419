"""The fast paths of the engine and of pricing keep the results: not timed (see benchmarks/bench_engine.py)."""

from __future__ import annotations

import dataclasses
import gc
import sys

from sim.costmodel.cache import CostCache, cost_signature
from sim.costmodel.host import host_costs
from sim.costmodel.pricing import price
from sim.engine import simulate
from sim.hardware import Hardware
from sim.run import GraphCache, load_scenario, run_scenario
from sim.trace import HOST_TRACK
from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_engine import synthetic_graph  # noqa: E402


def _key(trace):  # type: ignore[no-untyped-def]
    return trace.end_s, [(iv.track, iv.name, iv.cat, iv.start_s, iv.end_s, iv.op, dict(iv.args))
                         for iv in trace.intervals]


def test_synthetic_graph_runs_every_kernel_once_and_restores_gc(h200: Hardware) -> None:
    g = synthetic_graph(2000)
    costs = price(g, h200)
    assert gc.isenabled()
    trace = simulate(g, costs, host_costs(h200))
    assert gc.isenabled()
    kernels = [iv for iv in trace.intervals if iv.track != HOST_TRACK]
    assert sorted(iv.op for iv in kernels) == [i for i, o in enumerate(g.ops) if o.is_kernel]
    assert {iv.track for iv in kernels} == {"stream 0", "stream 1"}
    assert _key(simulate(g, costs, host_costs(h200))) == _key(trace)  # deterministic, bit for bit


def test_full_launch_queue_and_zero_host_cost_paths(h200: Hardware) -> None:
    g = synthetic_graph(300)
    for hw in (dataclasses.replace(h200, launch_queue_depth=1),
               dataclasses.replace(h200, eager_op_s=0.0, launch_s=0.0, launch_queue_depth=2)):
        trace = simulate(g, price(g, hw), host_costs(hw))
        kernels = [iv for iv in trace.intervals if iv.track != HOST_TRACK]
        assert len(kernels) == g.kernel_count()
        by_stream: dict[str, list[tuple[float, float]]] = {}
        for iv in kernels:
            by_stream.setdefault(iv.track, []).append((iv.start_s, iv.end_s))
        for spans in by_stream.values():  # streams run in order: no overlap on one stream
            spans.sort()
            assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(spans, spans[1:], strict=False))
    blocked = [iv for iv in simulate(g, price(g, dataclasses.replace(h200, launch_queue_depth=1)),
                                     host_costs(dataclasses.replace(h200, launch_queue_depth=1))).intervals
               if iv.cat == "blocked"]
    assert blocked  # a one-deep queue makes the host wait


def test_cost_cache_shares_identical_ops_and_separates_profiles(h200: Hardware) -> None:
    g = synthetic_graph(100)
    costs = price(g, h200)
    layer0 = [i for i, o in enumerate(g.ops) if o.name.startswith("layer0.")]
    layer1 = [i for i, o in enumerate(g.ops) if o.name.startswith("layer1.")]
    assert all(costs[a] is costs[b] for a, b in zip(layer0, layer1, strict=True))
    slower = dataclasses.replace(h200, hbm_sustained_bps=h200.hbm_sustained_bps / 2)
    other = price(g, slower)
    assert other[layer0[3]] is not costs[layer0[3]]
    assert cost_signature(g.ops[layer0[0]], g) == cost_signature(g.ops[layer1[0]], g)


def test_cost_cache_is_owned_by_its_caller(h200: Hardware) -> None:
    g, bigger = synthetic_graph(100), synthetic_graph(200)
    cache = CostCache()
    costs = price(g, h200, cache=cache)
    held = len(cache)
    assert 0 < held <= g.kernel_count()
    again = price(bigger, h200, cache=cache)  # the same layers: nothing new to price
    assert len(cache) == held and again[: len(costs)] == costs and again[3] is costs[3]
    fresh = price(g, h200)  # no cache given: one for this call only, the same values
    assert fresh == costs and fresh[3] is not costs[3]


def test_graphs_are_built_once_per_run_and_shared_across_profiles() -> None:
    scn = load_scenario(ROOT / "scenarios" / "serving_decode.yaml")
    assert len(scn.hardware) == 2
    graphs = GraphCache()
    result, traces = run_scenario(scn, keep_traces=True, graphs=graphs)
    a, b = (hw.name for hw in scn.hardware)
    for key in traces:
        if key[0] == a:
            assert traces[key].graph is traces[(b, key[1], key[2])].graph
    alone, _ = run_scenario(dataclasses.replace(scn, hardware=scn.hardware[1:]))  # nothing shared
    assert alone["hardware"][0] == result["hardware"][1]


def test_bench_instruction_count_task_and_missing_valgrind(monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    import shutil

    import bench_engine

    try:
        assert bench_engine.run_task({"kind": "engine_loop", "kernels": 20, "simulations": 2}) == {"kernels": 20}
    finally:
        gc.enable()  # the task turns the collector off (it is meant for a process of its own)
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert bench_engine.bench_instructions([1000], [ROOT]) == []
    assert "valgrind not found" in capsys.readouterr().out


class _NoSharing(GraphCache):
    """A GraphCache that never gives two variants one graph object (the reference for sharing)."""

    def _same_graph(self, base, graph):  # type: ignore[no-untyped-def]
        return graph


def test_variants_with_the_same_graph_share_it_and_give_the_same_results() -> None:
    scn = load_scenario(ROOT / "scenarios" / "bias_gelu_dropout.yaml")
    # Without the `choose` variant too: then only the bucket's own simulations are kept for sharing.
    plain = dataclasses.replace(scn, spec=scn.spec.model_copy(
        update={"variants": [v for v in scn.spec.variants if v.choose is None]}))
    for s in (scn, plain):
        result, traces = run_scenario(s, keep_traces=True, graphs=GraphCache())
        reference, ref_traces = run_scenario(s, keep_traces=True, graphs=_NoSharing())
        assert result == reference
        shared = 0
        for (hw, name, bi), trace in traces.items():
            if name != "dispatch_aligned":
                continue
            aligned = s.workload.params_for(s.buckets[bi])["tokens"] % 128 == 0  # the fused path is taken
            assert (trace.graph is traces[(hw, "fused_b2048", bi)].graph) == aligned
            assert (trace is traces[(hw, "fused_b2048", bi)]) == aligned  # simulated once
            assert ref_traces[(hw, name, bi)].graph is not ref_traces[(hw, "fused_b2048", bi)].graph
            shared += aligned
        assert shared > 0


def test_graphs_that_differ_only_in_a_number_type_are_not_shared() -> None:
    g = synthetic_graph(20)
    ln = g.ops[0]
    assert isinstance(ln.attrs["rows"], int)
    changed = g.with_ops([ln.with_(attrs={**ln.attrs, "rows": float(ln.attrs["rows"])}), *g.ops[1:]])
    assert changed == g  # 2048 == 2048.0, but the number prints (and enters cost keys) differently
    graphs = GraphCache()
    assert graphs._same_graph(g, g.with_ops(g.ops)) is g  # equal and indistinguishable: one object
    assert graphs._same_graph(g, changed) is changed
    assert graphs._same_graph(g, changed.with_ops(changed.ops)) is changed


def test_micro_sums_from_the_cached_op_lists_equal_the_direct_sums() -> None:
    from sim.run.results import _micro

    for name in ("bias_gelu_dropout.yaml", "transformer_block.yaml", "counter_case_fusion.yaml"):
        scn = load_scenario(ROOT / "scenarios" / name)
        graphs, cache = GraphCache(), CostCache()
        _, traces = run_scenario(scn, keep_traces=True, graphs=graphs, cache=cache)
        checked = 0
        for (hw, _, bi), trace in traces.items():
            base = traces[(hw, "baseline", bi)]
            direct = _micro(base.graph, base.costs, trace.graph, trace.costs)
            assert _micro(base.graph, base.costs, trace.graph, trace.costs, graphs) == direct
            assert _micro(trace.graph, trace.costs, base.graph, base.costs, graphs) == direct[::-1]
            # the signatures from the cost cache's memo (filled by pricing) give the same lists
            assert _micro(base.graph, base.costs, trace.graph, trace.costs, GraphCache(), cache) == direct
            checked += direct != (0, 0)
        assert checked > 0
