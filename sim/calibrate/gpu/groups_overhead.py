# ruff: noqa: B023  (closures run inside the loop iteration that defines them)
"""Host-side and concurrency groups: kernel_overhead, streams."""

from __future__ import annotations

import statistics
import time
from typing import Any

from . import common


def _launch_api_durations(fn: Any, n: int) -> dict[str, Any]:
    """Profile n calls of fn; durations of the CUDA runtime/driver launch calls (host us)."""
    import torch

    from .trace_utils import export_trace, runtime_events

    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                            torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(n):
            fn()
        torch.cuda.synchronize()
    tr = export_trace(prof)
    by_name: dict[str, list[float]] = {}
    for ev in runtime_events(tr):
        name = ev.get("name", "")
        if "aunch" in name:
            by_name.setdefault(name, []).append(float(ev.get("dur", 0.0)))
    return {name: {"count": len(d), "median_us": statistics.median(d), "samples_us": common.trim_samples(d)}
            for name, d in by_name.items()}


def _count_kernels(fn: Any) -> tuple[int, list[str]]:
    import torch

    from .trace_utils import export_trace, gpu_events

    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                            torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    ev = [e for e in gpu_events(export_trace(prof)) if e["kind"] == "kernel"]
    return len(ev), [e["name"][:120] for e in ev]


def _chain_fn(k: int) -> Any:
    """A tiny function that Inductor turns into about k kernels: k-1 dependent column
    reductions (each needs the previous one finished) plus one pointwise epilogue."""
    def f(x: Any) -> Any:
        y = x
        for _ in range(k - 1):
            y = (y * 1.5).sum(dim=0, keepdim=True) + x
        return y * 2.0 + 1.0
    return f


def run_kernel_overhead(ctx: Any) -> None:
    import torch

    from . import triton_kernels as K

    n_host = ctx.pick(200, 1000, 2000)
    n_graph = ctx.pick(20, 200, 500)
    x1 = torch.randn(1, device="cuda")
    o1 = torch.empty_like(x1)
    cases = {
        "triton_empty": lambda: K.launch_empty(x1),
        "torch_add_1elem_out": lambda: torch.add(x1, x1, out=o1),
    }
    for name, fn in cases.items():
        def one(name: str = name, fn: Any = fn) -> None:
            fn()
            torch.cuda.synchronize()
            rec: dict[str, Any] = {"bench": "launch", "kernel": name}
            if name == "triton_empty":
                rec.update(common.triton_kernel_info(K.launch_empty(x1)[0]))
            h = common.host_loop(fn, n=n_host, repeats=ctx.pick(2, 5, 7))
            g = common.bench_graph(fn, n_inner=n_graph, n_replays=ctx.pick(3, 10, 20))
            ev = ctx.bench(lambda i: fn(), flush=False)
            rec.update({"eager_host_enqueue_us": h["enqueue_us_per_call"], "eager_wall_us": h["drain_us_per_call"],
                        "eager_host": h, "graph_device_us_per_kernel": g["time_us"], "graph": g,
                        "event_time_us": ev["time_us"], "event": ev, "time_us": g["time_us"]})
            rec["launch_api"] = _launch_api_durations(fn, ctx.pick(50, 200, 300))
            ctx.record(rec)
        ctx.attempt(f"launch {name}", one)

    # eager per-op host dispatch on tiny tensors (outputs allocated by the caching allocator)
    xs = torch.randn(1024, device="cuda", dtype=torch.bfloat16)
    a16 = torch.randn(16, 16, device="cuda", dtype=torch.bfloat16)
    ops = {
        "add": lambda: torch.add(xs, xs),
        "mul": lambda: torch.mul(xs, xs),
        "gelu": lambda: torch.nn.functional.gelu(xs),
        "native_dropout": lambda: torch.native_dropout(xs, 0.1, True),
        "mm_16x16": lambda: torch.mm(a16, a16),
        "add_": lambda: xs.add_(0.0),
        "empty_like": lambda: torch.empty_like(xs),
        "view_reshape": lambda: xs.view(32, 32).t(),
    }
    for name, fn in ops.items():
        if ctx.out_of_time():
            return

        def one(name: str = name, fn: Any = fn) -> None:
            h = common.host_loop(fn, n=ctx.pick(100, 1000, 1000), repeats=ctx.pick(2, 5, 7))
            kn, names = _count_kernels(fn)
            ctx.record({"bench": "eager_dispatch", "op": name, "numel": 1024 if name != "mm_16x16" else 256,
                        "dtype": "bfloat16", "host_us_per_op": h["enqueue_us_per_call"],
                        "wall_us_per_op": h["drain_us_per_call"], "kernels_per_op": kn, "kernel_names": names,
                        "time_us": h["enqueue_us_per_call"], **h})
        ctx.attempt(f"eager_dispatch {name}", one)

    # CUDA graph replay overhead: host per replay, device per kernel inside a graph
    for n_k in ctx.pick([1, 10], [1, 10, 100], [1, 10, 100, 1000]):
        if ctx.out_of_time():
            return

        def one(n_k: int = n_k) -> None:
            y = torch.randn(1024, device="cuda")
            st = torch.cuda.Stream()
            st.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(st):
                y.add_(1.0)
            torch.cuda.current_stream().wait_stream(st)
            torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                for _ in range(n_k):
                    y.add_(1.0)
            torch.cuda.synchronize()
            h = common.host_loop(g.replay, n=ctx.pick(20, 200, 500), repeats=ctx.pick(2, 5, 7))
            ev = ctx.bench(lambda i: g.replay(), flush=False)
            ctx.record({"bench": "graph_replay", "kernels_in_graph": n_k, "kernel": "torch add_ 1024 fp32",
                        "host_us_per_replay": h["enqueue_us_per_call"], "wall_us_per_replay": h["drain_us_per_call"],
                        "device_us_per_replay": ev["time_us"], "device_us_per_kernel": ev["time_us"] / n_k,
                        "time_us": ev["time_us"], "host": h, "event": ev})
            g = None
        ctx.attempt(f"graph_replay n={n_k}", one)

    # torch.compile wrapper overhead
    for k in ctx.pick([1], [1, 3, 10], [1, 3, 10]):
        if ctx.out_of_time():
            return

        def one(k: int = k) -> None:
            x = torch.randn(64, 64, device="cuda")
            f_eager = _chain_fn(k)
            f = torch.compile(f_eager, dynamic=False)
            t0 = time.time()
            for _ in range(3):
                f(x)
            torch.cuda.synchronize()
            compile_s = time.time() - t0
            kn, names = _count_kernels(lambda: f(x))
            kn_e, _ = _count_kernels(lambda: f_eager(x))
            h = common.host_loop(lambda: f(x), n=ctx.pick(50, 300, 500), repeats=ctx.pick(2, 5, 7))
            he = common.host_loop(lambda: f_eager(x), n=ctx.pick(50, 300, 500), repeats=ctx.pick(2, 5, 7))
            ev = ctx.bench(lambda i: f(x), flush=False)
            ctx.record({"bench": "compiled_call", "chain_k": k, "shape": [64, 64], "dtype": "float32",
                        "kernels_per_call": kn, "kernel_names": names, "eager_kernels_per_call": kn_e,
                        "compiled_host_us_per_call": h["enqueue_us_per_call"],
                        "compiled_wall_us_per_call": h["drain_us_per_call"],
                        "eager_host_us_per_call": he["enqueue_us_per_call"],
                        "eager_wall_us_per_call": he["drain_us_per_call"],
                        "event_time_us": ev["time_us"], "time_us": h["enqueue_us_per_call"],
                        "first_calls_compile_s": compile_s, "compiled_host": h, "eager_host": he})
        ctx.attempt(f"compiled_call k={k}", one)


# ----------------------------------------------------------------------------- streams


def _timed(body: Any, reps: int) -> dict[str, Any]:
    """Median device time of body() (which may fork/join side streams) with events on the
    current stream."""
    import torch

    body()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        common.flush_l2()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        body()
        e.record()
        torch.cuda.synchronize()
        ts.append(s.elapsed_time(e) * 1e3)
    return {"time_us": statistics.median(ts), "samples_us": common.trim_samples(ts), "n_reps": reps}


def _on(streams: list[Any], works: list[Any]) -> Any:
    """body(): fork from the current stream, run works[i] on streams[i], join."""
    import torch

    def body() -> None:
        cur = torch.cuda.current_stream()
        for s in set(streams):
            s.wait_stream(cur)
        for s, w in zip(streams, works, strict=True):
            with torch.cuda.stream(s):
                w()
        for s in set(streams):
            cur.wait_stream(s)
    return body


def run_streams(ctx: Any) -> None:
    import torch

    reps = ctx.pick(3, 7, 15)
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()

    def scenario(name: str, wa: Any, wb: Any, extra: dict[str, Any]) -> None:
        a = _timed(_on([s1], [wa]), reps)
        b = _timed(_on([s2], [wb]), reps)
        serial = _timed(_on([s1, s1], [wa, wb]), reps)
        conc = _timed(_on([s1, s2], [wa, wb]), reps)
        ctx.record({"bench": "streams", "scenario": name, **extra, "a_alone_us": a["time_us"],
                    "b_alone_us": b["time_us"], "serial_us": serial["time_us"], "concurrent_us": conc["time_us"],
                    "time_us": conc["time_us"], "overlap_gain": 1 - conc["time_us"] / serial["time_us"],
                    "samples": {"a": a, "b": b, "serial": serial, "concurrent": conc}})

    def two_copies() -> None:
        n = ctx.pick(1 << 24, 1 << 27, 1 << 28)
        x1, y1 = torch.randn(n, device="cuda", dtype=torch.bfloat16), torch.empty(n, device="cuda", dtype=torch.bfloat16)
        x2, y2 = torch.randn(n, device="cuda", dtype=torch.bfloat16), torch.empty(n, device="cuda", dtype=torch.bfloat16)
        scenario("two_copies", lambda: y1.copy_(x1), lambda: y2.copy_(x2),
                 {"a": "copy_ bf16", "b": "copy_ bf16", "bytes_each": 4 * n})
    ctx.attempt("two_copies", two_copies)

    def gemm_and_tiny() -> None:
        m = ctx.pick(2048, 8192, 8192)
        A = torch.randn(m, m, device="cuda", dtype=torch.bfloat16)
        B = torch.randn(m, m, device="cuda", dtype=torch.bfloat16)
        C = torch.empty(m, m, device="cuda", dtype=torch.bfloat16)
        t = torch.randn(1024, device="cuda")
        n_tiny = ctx.pick(20, 200, 200)

        def tiny() -> None:
            for _ in range(n_tiny):
                t.add_(1.0)
        scenario("gemm_vs_tiny_chain", lambda: torch.mm(A, B, out=C), tiny,
                 {"a": f"mm bf16 {m}^3", "b": f"{n_tiny} x add_ 1024 fp32", "n_tiny": n_tiny})
    ctx.attempt("gemm_and_tiny", gemm_and_tiny)

    def h2d_with_kernel() -> None:
        nbytes = ctx.pick(64 << 20, 512 << 20, 1 << 30)
        host = torch.randn(nbytes // 4, dtype=torch.float32).pin_memory()
        dev = torch.empty(nbytes // 4, device="cuda", dtype=torch.float32)
        host_out = torch.empty(nbytes // 4, dtype=torch.float32).pin_memory()
        dev_src = torch.randn(nbytes // 4, device="cuda", dtype=torch.float32)
        m = 8192 if not ctx.smoke else 2048
        A = torch.randn(m, m, device="cuda", dtype=torch.bfloat16)
        C = torch.empty(m, m, device="cuda", dtype=torch.bfloat16)
        n_mm = ctx.pick(2, 10, 10)

        def mms() -> None:
            for _ in range(n_mm):
                torch.mm(A, A, out=C)
        h2d = lambda: dev.copy_(host, non_blocking=True)  # noqa: E731
        d2h = lambda: host_out.copy_(dev_src, non_blocking=True)  # noqa: E731
        scenario("h2d_vs_gemm", h2d, mms, {"a": f"H2D pinned {nbytes} B", "b": f"{n_mm} x mm bf16 {m}^3",
                                            "bytes": nbytes})
        scenario("d2h_vs_gemm", d2h, mms, {"a": f"D2H pinned {nbytes} B", "b": f"{n_mm} x mm bf16 {m}^3",
                                            "bytes": nbytes})
        scenario("h2d_vs_d2h", h2d, d2h, {"a": f"H2D pinned {nbytes} B", "b": f"D2H pinned {nbytes} B",
                                           "bytes": nbytes})
        for rec in ctx.rf.doc["records"][-3:]:
            if rec["scenario"] in ("h2d_vs_gemm", "d2h_vs_gemm"):
                rec["pcie_gbps_alone"] = nbytes / (rec["a_alone_us"] * 1e-6) / 1e9
    ctx.attempt("h2d_with_kernel", h2d_with_kernel)
