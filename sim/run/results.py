"""Running a scenario: every (hardware, variant, bucket) simulated and aggregated into the
`kernelsim.run/v1` JSON (docs/json.md), with error bands from validation."""

from __future__ import annotations

from typing import Any

from sim.costmodel import KernelCost
from sim.costmodel.cache import CostCache
from sim.graph import Graph
from sim.metrics import TERMS, StepMetrics
from sim.run.load import Scenario
from sim.run.variants import GraphCache, op_signature
from sim.schema.scenario import Variant
from sim.schema.workload import Bucket
from sim.trace import Trace
from sim.validate.bands import annotate_run, calibrated_kernel_share, correction_points, load_bands

RUN_SCHEMA = "kernelsim.run/v1"


def _micro(base: Graph, base_costs: tuple[KernelCost | None, ...], var: Graph,
           var_costs: tuple[KernelCost | None, ...], graphs: GraphCache | None = None,
           cache: CostCache | None = None) -> tuple[float, float]:
    """Kernel time of what the variant changed: (baseline kernels replaced, variant kernels new)."""
    if graphs is not None:  # the same sums, the ops found once per pair of graphs
        replaced_ops, new_ops = graphs.micro_ops(base, base_costs, var, var_costs, cache)
        return _kernel_time(base_costs, replaced_ops), _kernel_time(var_costs, new_ops)
    b_sig = [op_signature(o, base) for o in base.ops]
    v_sig = [op_signature(o, var) for o in var.ops]
    base_sigs = {s: c for s, c in zip(b_sig, base_costs, strict=True) if c is not None}
    var_sigs = {s: c for s, c in zip(v_sig, var_costs, strict=True) if c is not None}
    replaced = sum(c.time_s for s, c in base_sigs.items() if s not in var_sigs)
    new = sum(c.time_s for s, c in var_sigs.items() if s not in base_sigs)
    return replaced, new


def _kernel_time(costs: tuple[KernelCost | None, ...], ops: list[int]) -> float:
    """sum() of the ops' kernel times, in the order given (every one of them is priced)."""
    return sum(c.time_s for c in (costs[i] for i in ops) if c is not None)


def _bucket_result(b: Bucket, params: dict[str, float], m: StepMetrics, path: str) -> dict[str, Any]:
    return {
        "name": b.name or ",".join(f"{k}={_fmt(v)}" for k, v in b.params.items()),
        "params": {k: params[k] for k in sorted(params)},
        "weight": b.weight,
        "time_us": m.time_s * 1e6,
        "breakdown_us": {t: m.breakdown_s[t] * 1e6 for t in TERMS},
        "dominant": m.dominant,
        "kernels": m.kernels,
        "kernel_time_us": m.kernel_time_s * 1e6,
        "host_busy_us": m.host_busy_s * 1e6,
        "host_share": m.host_share,
        "hbm_bytes": m.hbm_bytes,
        "path": path,
    }


def _fmt(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else f"{v:g}"


def run_scenario(scn: Scenario, *, keep_traces: bool = False, cache: CostCache | None = None,
                 graphs: GraphCache | None = None) -> tuple[dict[str, Any], dict[tuple[str, str, int], Trace]]:
    """Simulate every (hardware, variant, bucket); returns the JSON-ready result and, on request, traces.

    `cache` holds kernel costs and `graphs` built graphs for this run (pass them to share them
    between runs, as a sweep worker does).
    """
    cache = cache if cache is not None else CostCache()
    graphs = graphs if graphs is not None else GraphCache()
    traces: dict[tuple[str, str, int], Trace] = {}
    total_w = sum(b.weight for b in scn.buckets)
    hw_results = []
    variants = [Variant(name="baseline", description="the workload as written")] + list(scn.spec.variants)
    for hw in scn.hardware:
        points = correction_points(hw)  # which kernels sit on calibrated points (error bands)
        per_variant: dict[str, list[dict[str, Any]]] = {v.name: [] for v in variants}
        micro: dict[str, list[tuple[float, float, float]]] = {v.name: [] for v in variants}
        for bi, b in enumerate(scn.buckets):
            params = scn.workload.params_for(b)
            base_graph = graphs.build(scn.workload, params)
            base_costs = graphs.price(base_graph, hw, cache)
            base_trace: Trace | None = None
            for vi, v in enumerate(variants):
                if vi == 0:
                    graph, path, costs = base_graph, "baseline", base_costs
                else:
                    graph, path = graphs.variant(scn, v, vi - 1, base_graph, params, hw, cache)
                    costs = graphs.price(graph, hw, cache)
                trace, m, comm = graphs.simulate(scn, graph, costs, hw, params, cache)
                if keep_traces:
                    traces[(hw.name, v.name, bi)] = trace
                per_variant[v.name].append(_bucket_result(b, params, m, path))
                per_variant[v.name][-1]["shapes"] = "calibrated" if calibrated_kernel_share(graph, costs, points) > 0 else "unseen"
                if comm is not None:
                    per_variant[v.name][-1]["comm"] = comm
                # The simulated (first) rank's graph and costs: on several ranks its collectives are priced
                # over the real group, where `costs` priced them as one-rank calls (only the launch).
                base_trace = base_trace or trace
                rep, new = _micro(base_trace.graph, base_trace.costs, trace.graph, trace.costs, graphs, cache)
                micro[v.name].append((b.weight, rep, new))
        base_buckets = per_variant["baseline"]
        base_w = sum(bk["time_us"] * bk["weight"] for bk in base_buckets) / total_w
        out_variants = []
        for v in variants:
            bks = per_variant[v.name]
            for bk, bb in zip(bks, base_buckets, strict=True):
                bk["gain_vs_baseline"] = 1.0 - bk["time_us"] / bb["time_us"]
            weighted = sum(bk["time_us"] * bk["weight"] for bk in bks) / total_w
            fallback = sum(bk["weight"] for bk in bks if "fallback" in bk["path"].split("+")) / total_w
            covered = 0.0 if v.name == "baseline" else sum(
                bk["weight"] for bk in bks if "fallback" not in bk["path"].split("+")) / total_w
            rep_w = sum(w * r for w, r, _ in micro[v.name]) / total_w
            new_w = sum(w * n for w, _, n in micro[v.name]) / total_w
            worst = min(bks, key=lambda bk: bk["gain_vs_baseline"])
            out_variants.append(
                {
                    "name": v.name,
                    "description": v.description,
                    "weighted_time_us": weighted,
                    "gain_vs_baseline": 1.0 - weighted / base_w,
                    "coverage": covered,
                    "fallback_rate": fallback,
                    "micro": {
                        "replaced_kernel_time_us": rep_w * 1e6,
                        "new_kernel_time_us": new_w * 1e6,
                        "gain": (1.0 - new_w / rep_w) if rep_w > 0 else None,
                    },
                    "tail": {
                        "worst_bucket": worst["name"],
                        "worst_gain": worst["gain_vs_baseline"],
                        "p90_time_us": _weighted_quantile([(bk["time_us"], bk["weight"]) for bk in bks], 0.9),
                    },
                    "buckets": bks,
                }
            )
        hw_results.append(
            {"name": hw.name, "gpu": hw.gpu, "profile": hw.source_file, "measured": hw.measured, "variants": out_variants}
        )
    result = {
        "schema": RUN_SCHEMA,
        "scenario": scn.spec.name,
        "workload": scn.workload.name,
        "min_gain": scn.spec.min_gain,
        "hardware": hw_results,
    }
    annotate_run(result, load_bands())  # error bands from validation (sim.validate.bands)
    return result, traces


def _weighted_quantile(values: list[tuple[float, float]], q: float) -> float:
    vals = sorted(values)
    total = sum(w for _, w in vals)
    acc = 0.0
    for v, w in vals:
        acc += w
        if acc >= q * total - 1e-12:
            return v
    return vals[-1][0]
