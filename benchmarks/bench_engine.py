"""Engine and sweep throughput: simulated kernels/s, the 1M-kernel step end to end, metrics vs streams, sweeps.

Run: `python benchmarks/bench_engine.py [--big] [--sizes 10000] [--e2e KERNELS] [--streams 1 16 256]
[--sweep-points 1000] [--workers N] [--dask] [--repeats R] [--against OTHER_CHECKOUT] [--instructions]
[--json OUT]`.
A default run is short (10k-kernel engine, metrics vs streams, a 1000-point sweep); `--big` adds the
1M-kernel engine run and the 1M-kernel step end to end (minutes on a 2-core machine).
It is a command, not a timed test: numbers depend on the machine (and on its other load: on a
shared machine compare `--against` a checkout of the old code, which runs every figure
alternately for both trees, each run in a fresh process, and reports medians and ratios).

Figures:
- engine: `simulate()` alone on synthetic layer stacks (GEMMs, elementwise ops, a reduction, a
  copy on a second stream that the next layer waits for) built through the normal workload path;
  kernels/s = kernels / median simulate time;
- e2e: one step end to end (build + price + simulate + metrics) with each phase's time and the
  process's peak resident memory (ru_maxrss, imports included);
- streams: step_metrics time on a graph of independent kernels spread over S streams (as many
  in flight as streams), same kernel count for every S;
- sweep: the shipped bias+GELU+dropout scenario swept over hardware profiles and MLP sizes, on
  the local process pool (and Dask's LocalCluster with --dask);
- instructions (`--instructions`, needs valgrind): CPU instructions per simulated kernel, counted by
  callgrind: a process that builds and prices the graph and simulates it once, another that
  simulates it twice; the difference is one simulate(). Unlike times, the count hardly moves with
  the machine's other load: identical code read 0.983x to 0.988x of itself in three pairs of runs
  (1000 and 2000 kernels) on the shared 2-core VM, where its CPU-time ratios read 1.33x and 1.58x;
  so it resolves changes of a few per cent, not less. It runs about 50x slower than natively.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import MappingProxyType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# The synthetic graphs go far past the input limits meant for users' files (sim.limits): 1M kernels
# are a 100k-fold repeat. Set before sim is imported, here and in every measuring process.
ONE_BLAS_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
BENCH_LIMITS = {"KERNELSIM_MAX_REPEAT": "10000000", "KERNELSIM_MAX_GRAPH_OPS": "100000000"}
for _name, _value in BENCH_LIMITS.items():
    os.environ.setdefault(_name, _value)
# Only when `sim` is not imported yet: a measuring process (--against) imports the measured tree's `sim`
# first, and this folder must not come before that tree on sys.path, which the local pool's spawned
# workers inherit (they would import this checkout's `sim` and time it for the other tree).
if "sim" not in sys.modules and str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from sim.costmodel.host import host_costs  # noqa: E402
from sim.costmodel.pricing import price  # noqa: E402
from sim.engine import simulate  # noqa: E402
from sim.graph import Graph  # noqa: E402
from sim.hardware import load_profile  # noqa: E402
from sim.metrics import step_metrics  # noqa: E402
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


def streams_graph(streams: int, kernels: int) -> Graph:
    """`kernels` independent elementwise kernels round-robin over `streams` streams (all may overlap)."""
    from sim.graph import Op, Tensor

    # 2 GiB per kernel (about 1 ms alone): kernels outlast the host's launches, so up to `streams` overlap.
    tensors = {f"t{s}": Tensor(f"t{s}", (1 << 30,), "bf16") for s in range(streams)}
    ops = tuple(Op(name=f"k{i}", kind="elementwise", reads=(f"t{i % streams}",), writes=(f"t{i % streams}",),
                   stream=i % streams, attrs=MappingProxyType({"math": MappingProxyType({"add": 1.0})}))
                for i in range(kernels))
    return Graph(name=f"streams_{streams}", kind="training", params=MappingProxyType({}),
                 tensors=MappingProxyType(tensors), ops=ops)


def _peak_rss_bytes() -> int:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def run_task(task: dict[str, Any]) -> dict[str, Any]:
    """One measurement, in this process (a fresh one: see --task)."""
    hw = load_profile("h200-sxm")
    kind = task["kind"]
    if kind == "engine_loop":  # for --instructions: no timing, the collector off (its passes vary)
        import gc

        gc.disable()
        graph = synthetic_graph(task["kernels"])
        costs, host = price(graph, hw), host_costs(hw)
        for _ in range(task["simulations"]):
            simulate(graph, costs, host)
        return {"kernels": graph.kernel_count()}
    if kind == "engine":
        graph = synthetic_graph(task["kernels"])
        costs = price(graph, hw)
        t0, c0 = time.perf_counter(), time.process_time()
        trace = simulate(graph, costs, host_costs(hw))
        dt, dc = time.perf_counter() - t0, time.process_time() - c0
        return {"simulate_s": dt, "simulate_cpu_s": dc, "kernels": graph.kernel_count(), "step_time_us": trace.end_s * 1e6}
    if kind == "e2e":
        t0, c0 = time.perf_counter(), time.process_time()
        graph = synthetic_graph(task["kernels"])
        t1, c1 = time.perf_counter(), time.process_time()
        costs = price(graph, hw)
        t2, c2 = time.perf_counter(), time.process_time()
        trace = simulate(graph, costs, host_costs(hw))
        t3, c3 = time.perf_counter(), time.process_time()
        m = step_metrics(trace)
        t4, c4 = time.perf_counter(), time.process_time()
        return {"build_s": t1 - t0, "price_s": t2 - t1, "simulate_s": t3 - t2, "metrics_s": t4 - t3,
                "total_s": t4 - t0, "total_cpu_s": c4 - c0, "build_cpu_s": c1 - c0, "price_cpu_s": c2 - c1,
                "simulate_cpu_s": c3 - c2, "metrics_cpu_s": c4 - c3, "peak_rss_bytes": _peak_rss_bytes(),
                "kernels": graph.kernel_count(), "step_time_us": m.time_s * 1e6}
    if kind == "streams":
        graph = streams_graph(task["streams"], task["kernels"])
        trace = simulate(graph, price(graph, hw), host_costs(hw))
        t0 = time.perf_counter()
        step_metrics(trace)
        return {"metrics_s": time.perf_counter() - t0}
    if kind == "sweep":
        from sim.sweep import load_sweep, run_sweep

        with tempfile.TemporaryDirectory() as tmp:
            path = sweep_scenario(task["points"], Path(tmp), Path.cwd())  # the measured tree's own scenario
            plan = load_sweep(path)
            t0, c0 = time.perf_counter(), _cpu_with_children()
            outcome = run_sweep(plan, Path(tmp) / "out", workers=task["workers"], executor=task["executor"],
                                progress=False)
            return {"seconds": time.perf_counter() - t0, "cpu_s": _cpu_with_children() - c0,
                    "points": len(plan.points), "infeasible": outcome.infeasible}
    raise ValueError(f"unknown task kind {kind!r}")


def _cpu_with_children() -> float:
    """CPU seconds of this process and of its finished children (a local pool's workers, once joined)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _task_command(task: dict[str, Any], tree: Path) -> list[str]:
    """The command that runs one task in a new Python process whose `sim` comes from `tree`."""
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); import sim; "
            f"sys.path.insert(1, {str(ROOT / 'benchmarks')!r}); import bench_engine; "
            "print(json.dumps(bench_engine.run_task(json.loads(sys.argv[2]))))")
    return [sys.executable, "-c", code, str(tree), json.dumps(task)]


def in_fresh_process(task: dict[str, Any], tree: Path) -> dict[str, Any]:
    """Run one task in a new Python process whose `sim` comes from `tree` (this checkout or another)."""
    out = subprocess.run(_task_command(task, tree), check=True, capture_output=True, text=True, cwd=tree,
                         env={**os.environ, **BENCH_LIMITS})
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure(task: dict[str, Any], trees: list[Path], repeats: int) -> list[list[dict[str, Any]]]:
    """`repeats` runs of `task` per tree, alternating trees (so both see the same machine load)."""
    runs: list[list[dict[str, Any]]] = [[] for _ in trees]
    for _ in range(repeats):
        for k, tree in enumerate(trees):
            runs[k].append(in_fresh_process(task, tree))
    return runs


def _median(rows: list[dict[str, Any]], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def _label(trees: list[Path], k: int) -> str:
    return "this" if k == 0 else f"against ({trees[k]})"


def _ratio_note(meds: list[float], higher_is_better: bool) -> str:
    if len(meds) < 2 or not meds[1] or not meds[0]:
        return ""
    r = meds[0] / meds[1] if higher_is_better else meds[1] / meds[0]
    return f"  [this is {r:.2f}x the other]"


def bench_engine(sizes: list[int], trees: list[Path], repeats: int) -> list[dict[str, Any]]:
    rows = []
    for n in sizes:
        runs = measure({"kind": "engine", "kernels": n}, trees, repeats if n < 1_000_000 else max(1, repeats // 2))
        k = runs[0][0]["kernels"]
        meds = [k / _median(r, "simulate_s") for r in runs]
        cpu = [k / _median(r, "simulate_cpu_s") for r in runs]  # CPU time: less swayed by the machine's other load
        same = all(r["step_time_us"] == runs[0][0]["step_time_us"] for rr in runs for r in rr)
        for t, r in enumerate(runs):
            print(f"engine {k:>8} kernels, {_label(trees, t)}: {meds[t]:>9,.0f} kernels/s wall, {cpu[t]:>9,.0f} per "
                  f"CPU second (median of {len(r)}: " + ", ".join(f"{x['simulate_s']:.2f}" for x in r) + " s)", flush=True)
        print(f"  same step time in every run: {same}{_ratio_note(meds, True)} wall,{_ratio_note(cpu, True)} CPU",
              flush=True)
        rows.append({"kernels": k, "kernels_per_s": meds, "kernels_per_cpu_s": cpu, "runs": runs, "same_step_time": same})
    return rows


def bench_e2e(n: int, trees: list[Path], repeats: int) -> dict[str, Any]:
    runs = measure({"kind": "e2e", "kernels": n}, trees, repeats)
    for t, r in enumerate(runs):
        ph = {key: _median(r, key) for key in ("build_s", "price_s", "simulate_s", "metrics_s", "total_s")}
        rss = max(x["peak_rss_bytes"] for x in r)
        cpu = _median(r, "total_cpu_s") if all("total_cpu_s" in x for x in r) else float("nan")
        print(f"e2e {r[0]['kernels']:>8} kernels, {_label(trees, t)}: {ph['total_s']:.1f} s (build {ph['build_s']:.1f}, "
              f"price {ph['price_s']:.1f}, simulate {ph['simulate_s']:.1f}, metrics {ph['metrics_s']:.1f}; medians of "
              f"{len(r)}; {cpu:.1f} CPU s), peak RSS {rss / 2**30:.2f} GiB", flush=True)
        if all("build_cpu_s" in x for x in r):  # the phases in CPU seconds (less swayed by the machine's other load)
            print("  CPU s: " + ", ".join(f"{key} {_median(r, key + '_cpu_s'):.2f}"
                                          for key in ("build", "price", "simulate", "metrics")), flush=True)
    print(f"  {_ratio_note([_median(r, 'total_s') for r in runs], False).strip()}", flush=True)
    return {"kernels": n, "runs": runs}


def bench_streams(streams: list[int], kernels: int, trees: list[Path], repeats: int) -> dict[str, Any]:
    out: dict[str, Any] = {"kernels": kernels, "by_tree": []}
    for t, tree in enumerate(trees):
        meds = {}
        for s in streams:
            meds[s] = _median(measure({"kind": "streams", "streams": s, "kernels": kernels}, [tree], repeats)[0],
                              "metrics_s")
        lo = meds[streams[0]]
        print(f"metrics, {kernels} kernels, {_label(trees, t)}: " + ", ".join(
            f"{s} streams {m * 1e3:.0f} ms ({m / lo:.2f}x)" for s, m in meds.items()), flush=True)
        out["by_tree"].append({str(s): m for s, m in meds.items()})
    return out


SWEEP_AXES_DOC = "hardware × hidden × ffn over the shipped bias+GELU+dropout scenario"


def sweep_scenario(points: int, folder: Path, root: Path = ROOT) -> Path:
    """The shipped MLP scenario of checkout `root` with a sweep section of about `points` points."""
    import yaml

    base = yaml.safe_load((root / "scenarios" / "bias_gelu_dropout.yaml").read_text())
    base["workload"] = str(root / "workloads" / "mlp_bias_gelu_dropout.yaml")
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


def bench_sweep(points: int, workers: int, executors: list[str], trees: list[Path], repeats: int) -> list[dict[str, Any]]:
    rows = []
    for ex in executors:
        runs = measure({"kind": "sweep", "points": points, "workers": workers, "executor": ex}, trees, repeats)
        for t, r in enumerate(runs):
            sec = _median(r, "seconds")
            print(f"sweep {ex:>5} ({workers} workers), {_label(trees, t)}: {r[0]['points']} points in {sec:6.1f} s "
                  f"(median of {len(r)}) = {r[0]['points'] / sec:7.1f} points/s ({r[0]['infeasible']} infeasible); "
                  f"{_median(r, 'cpu_s'):6.1f} CPU s (the workers' included)", flush=True)
        print(f"  {_ratio_note([_median(r, 'seconds') for r in runs], False).strip()}", flush=True)
        print(f"  CPU s: {_ratio_note([_median(r, 'cpu_s') for r in runs], False).strip()}", flush=True)
        rows.append({"executor": ex, "workers": workers, "runs": runs})
    return rows


def bench_instructions(sizes: list[int], trees: list[Path]) -> list[dict[str, Any]]:
    """Instructions per simulated kernel (callgrind), per size and tree; every process runs at once."""
    import re
    import shutil

    valgrind = shutil.which("valgrind")
    if valgrind is None:
        print("instructions: valgrind not found, skipped", flush=True)
        return []
    # Addresses fixed where the system allows it (object ids key some dicts): fewer run-to-run differences.
    setarch = shutil.which("setarch")
    no_aslr = [setarch, platform.machine(), "-R"] if setarch else []
    runs = {}
    for n in sizes:
        for t, tree in enumerate(trees):
            for sims in (1, 2):
                cmd = [*no_aslr, valgrind, "--tool=callgrind", "--callgrind-out-file=/dev/null",
                       *_task_command({"kind": "engine_loop", "kernels": n, "simulations": sims}, tree)]
                # A fixed hash seed: string hashes (so dict probes) the same in every process.
                # One BLAS thread: numpy's idle BLAS threads spin for a while after import, and callgrind
                # counts their instructions too (seen as thousands per kernel, either sign, in the difference).
                runs[n, t, sims] = subprocess.Popen(cmd, cwd=tree, env={**os.environ, **BENCH_LIMITS, "PYTHONHASHSEED": "0",
                                                                        **ONE_BLAS_THREAD},
                                                    text=True,
                                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    counts: dict[tuple[int, int, int], int] = {}
    kernels: dict[int, int] = {}
    for key, proc in runs.items():
        out, err = proc.communicate()
        found = re.search(r"Collected\s*:\s*(\d+)", err)
        if proc.returncode != 0 or found is None:
            raise RuntimeError(f"callgrind run {key} failed: {err[-2000:]}")
        counts[key] = int(found.group(1))
        kernels[key[0]] = json.loads(out.strip().splitlines()[-1])["kernels"]
    rows = []
    for n in sizes:
        per = [(counts[n, t, 2] - counts[n, t, 1]) / kernels[n] for t in range(len(trees))]
        for t in range(len(trees)):
            print(f"instructions {kernels[n]:>8} kernels, {_label(trees, t)}: {per[t]:,.0f} per simulated kernel",
                  flush=True)
        if len(per) > 1:
            print(f"  [this is {per[0] / per[1]:.3f}x the other]", flush=True)
        rows.append({"kernels": kernels[n], "instructions_per_kernel": per})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="*", default=[10_000], help="engine graph sizes (kernels)")
    ap.add_argument("--e2e", type=int, default=0, metavar="KERNELS", help="end-to-end step size; 0 skips")
    ap.add_argument("--big", action="store_true", help="add the 1M-kernel engine size and a 1M-kernel end-to-end step")
    ap.add_argument("--streams", type=int, nargs="*", default=[1, 16, 256], help="metrics vs streams; none skips")
    ap.add_argument("--streams-kernels", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=3, help="runs per figure and tree (medians)")
    ap.add_argument("--sweep-points", type=int, default=1000, help="0 skips the sweep benchmark")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--dask", action="store_true", help="also run the sweep on a Dask LocalCluster")
    ap.add_argument("--against", metavar="CHECKOUT", help="another checkout (e.g. a worktree of main): "
                    "every figure is measured for both, alternately")
    ap.add_argument("--instructions", action="store_true", help="also count CPU instructions per simulated "
                    "kernel with valgrind's callgrind at each --sizes size below 1M (load-independent; slow)")
    ap.add_argument("--json", metavar="OUT", help="write the figures as JSON")
    args = ap.parse_args(argv)
    if args.big:
        args.sizes = sorted({*args.sizes, 1_000_000})
        args.e2e = args.e2e or 1_000_000
    trees = [ROOT] + ([Path(args.against).resolve()] if args.against else [])
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}, load average {os.getloadavg()[0]:.1f}")
    out: dict[str, Any] = {"machine": {"cores": os.cpu_count(), "python": platform.python_version(),
                                       "platform": platform.platform(), "load_average": os.getloadavg()},
                           "trees": [str(t) for t in trees]}
    if args.sizes:
        out["engine"] = bench_engine(args.sizes, trees, args.repeats)
    if args.instructions:
        out["instructions"] = bench_instructions([n for n in args.sizes if n < 1_000_000] or [10_000], trees)
    if args.streams:
        out["streams"] = bench_streams(args.streams, args.streams_kernels, trees, args.repeats)
    if args.e2e > 0:
        out["e2e"] = bench_e2e(args.e2e, trees, max(1, args.repeats // 2))
    if args.sweep_points > 0:
        out["sweep"] = bench_sweep(args.sweep_points, args.workers, ["local"] + (["dask"] if args.dask else []),
                                   trees, args.repeats)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
