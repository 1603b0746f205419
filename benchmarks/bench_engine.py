"""Engine and sweep throughput: simulated kernels/s on one core, sweep points/s on all cores.

Run: `python benchmarks/bench_engine.py [--sizes 1000 10000 100000] [--sweep-points 1000]
[--workers N] [--dask] [--json OUT]`. It is a command, not a timed test: numbers depend on
the machine. The graphs are synthetic layer stacks (GEMMs, elementwise ops, a reduction,
a copy on a second stream that the next layer waits for) built through the normal
workload path; the sweep is the shipped bias+GELU+dropout scenario swept over hardware
profiles and MLP sizes.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from sim.engine import simulate  # noqa: E402
from sim.graph import Graph  # noqa: E402
from sim.hardware import load_profile  # noqa: E402
from sim.report.metrics import step_metrics  # noqa: E402
from sim.scenario import price  # noqa: E402
from sim.schema.workload import WorkloadFile  # noqa: E402
from sim.workload import build_graph  # noqa: E402

KERNELS_PER_LAYER = 10


def synthetic_graph(kernels: int, tokens: int = 2048) -> Graph:
    """A stack of layers, 10 kernels each: 4 GEMMs, 4 elementwise, 1 reduction, 1 copy on stream 1."""
    layers = max(1, kernels // KERNELS_PER_LAYER)
    spec = WorkloadFile.model_validate({
        "schema": "kernelsim.workload/v1", "name": f"synthetic_{layers * KERNELS_PER_LAYER}", "kind": "training",
        "parameters": {"tokens": tokens, "d": 2048, "ffn": 8192, "layers": layers},
        "distribution": {"buckets": [{"params": {}, "weight": 1}]},
        "tensors": {n: {"shape": s, "dtype": "bf16"} for n, s in {
            "x": ["tokens", "d"], "w": ["d", "d"], "wi": ["d", "ffn"], "wo": ["ffn", "d"], "q": ["tokens", "d"],
            "h": ["tokens", "ffn"], "g": ["tokens", "ffn"], "y": ["tokens", "d"], "z": ["tokens", "d"],
            "ln": ["d"], "side": ["tokens", "d"]}.items()},
        "ops": [{"kind": "repeat", "name": "layer", "count": "layers", "ops": [
            {"name": "ln", "kind": "reduction", "rows": "tokens", "cols": "d", "reads": ["x", "ln"], "writes": ["z"],
             "math": {"add": 3, "mul": 3}},
            {"name": "qkv", "kind": "gemm", "m": "tokens", "n": "d", "k": "d", "reads": ["z", "w"], "writes": ["q"]},
            {"name": "proj", "kind": "gemm", "m": "tokens", "n": "d", "k": "d", "reads": ["q", "w"], "writes": ["y"]},
            {"name": "res1", "kind": "elementwise", "reads": ["x", "y"], "writes": ["x"], "math": {"add": 1}},
            {"name": "copy", "kind": "copy", "reads": ["x"], "writes": ["side"], "stream": 1},
            {"name": "fc1", "kind": "gemm", "m": "tokens", "n": "ffn", "k": "d", "reads": ["x", "wi"], "writes": ["h"]},
            {"name": "gelu", "kind": "elementwise", "reads": ["h"], "writes": ["g"], "math": {"gelu": 1}},
            {"name": "fc2", "kind": "gemm", "m": "tokens", "n": "d", "k": "ffn", "reads": ["g", "wo"], "writes": ["y"]},
            {"name": "res2", "kind": "elementwise", "reads": ["x", "y"], "writes": ["x"], "math": {"add": 1}},
            {"name": "mix", "kind": "elementwise", "reads": ["x", "side"], "writes": ["x"], "math": {"add": 1}},
        ]}],
    })
    return build_graph(spec, dict(spec.parameters), "<synthetic>")


def bench_engine(sizes: list[int], repeats: int) -> list[dict[str, Any]]:
    hw = load_profile("h200-sxm")
    rows = []
    for n in sizes:
        graph = synthetic_graph(n)
        t0 = time.perf_counter()
        costs = price(graph, hw)
        t_price = time.perf_counter() - t0
        best_sim = float("inf")
        for _ in range(repeats if n < 100_000 else 1):
            t0 = time.perf_counter()
            trace = simulate(graph, costs, hw)
            best_sim = min(best_sim, time.perf_counter() - t0)
        t0 = time.perf_counter()
        step_metrics(trace)
        t_metrics = time.perf_counter() - t0
        k = graph.kernel_count()
        rows.append({
            "kernels": k, "simulate_s": best_sim, "price_s": t_price, "metrics_s": t_metrics,
            "engine_kernels_per_s": k / best_sim, "pipeline_kernels_per_s": k / (best_sim + t_price + t_metrics),
            "step_time_us": trace.end_s * 1e6,
        })
        print(f"{k:>7} kernels: engine {k / best_sim:>9,.0f} kernels/s ({best_sim * 1e3:8.1f} ms); "
              f"price {t_price * 1e3:7.1f} ms; metrics {t_metrics * 1e3:7.1f} ms; "
              f"price+simulate+metrics {k / (best_sim + t_price + t_metrics):>9,.0f} kernels/s", flush=True)
    return rows


SWEEP_AXES_DOC = "hardware × hidden × ffn over the shipped bias+GELU+dropout scenario"


def sweep_scenario(points: int, folder: Path) -> Path:
    """The shipped MLP scenario with a sweep section of about `points` points."""
    import yaml

    base = yaml.safe_load((ROOT / "scenarios" / "bias_gelu_dropout.yaml").read_text())
    base["workload"] = str(ROOT / "workloads" / "mlp_bias_gelu_dropout.yaml")
    profiles = ["h200-sxm", "h100-sxm", "a100-sxm-80gb", "l40s"]
    per_profile = max(1, points // len(profiles))
    n_ffn = next(d for d in range(int(per_profile ** 0.5), 0, -1) if per_profile % d == 0)
    n_hidden = per_profile // n_ffn
    base["sweep"] = {
        "hardware": profiles,
        "params": {"hidden": [1024 + 128 * i for i in range(n_hidden)], "ffn": [4096 + 512 * i for i in range(n_ffn)]},
    }
    path = folder / "bench_sweep.yaml"
    path.write_text(yaml.safe_dump(base, sort_keys=False))
    return path


def bench_sweep(points: int, workers: int, executors: list[str]) -> list[dict[str, Any]]:
    from sim.sweep import load_sweep, run_sweep

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        path = sweep_scenario(points, Path(tmp))
        plan = load_sweep(path)
        for ex in executors:
            t0 = time.perf_counter()
            outcome = run_sweep(plan, Path(tmp) / f"out_{ex}", workers=workers, executor=ex, progress=False)
            dt = time.perf_counter() - t0
            n = len(plan.points)
            rows.append({"executor": ex, "workers": workers, "points": n, "seconds": dt, "points_per_s": n / dt,
                         "infeasible": outcome.infeasible})
            print(f"sweep {ex:>5} ({workers} workers): {n} points in {dt:6.1f} s = {n / dt:7.1f} points/s"
                  f" ({outcome.infeasible} infeasible)", flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    ap.add_argument("--repeats", type=int, default=3, help="best of N for graphs under 100k kernels")
    ap.add_argument("--sweep-points", type=int, default=1000, help="0 skips the sweep benchmark")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--dask", action="store_true", help="also run the sweep on a Dask LocalCluster")
    ap.add_argument("--json", metavar="OUT", help="write the figures as JSON")
    args = ap.parse_args(argv)
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    out: dict[str, Any] = {"machine": {"cores": os.cpu_count(), "python": platform.python_version(),
                                       "platform": platform.platform()}}
    out["engine"] = bench_engine(args.sizes, args.repeats)
    if args.sweep_points > 0:
        out["sweep"] = bench_sweep(args.sweep_points, args.workers, ["local"] + (["dask"] if args.dask else []))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
