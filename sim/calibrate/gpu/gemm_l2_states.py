"""Small-M GEMMs in three L2 states (issue 18; docs/gemm_small_m.md says why).

The calibration's GEMM records run with the operands just written (L2-resident), the held-out sets
flush L2 by writing a 256 MB buffer (L2 full of dirty lines that must be written back), and a real
decode step reads each layer's weights once with L2 holding other, clean data. This measures the
same shapes in each state, device-side (torch.profiler: the GEMM kernels' time per call, and each kernel's median):

- ``warm``: the same weight matrix every call;
- ``dirty``: a 256 MB buffer written before each call (the held-out sets' flush);
- ``clean``: a 256 MB buffer read (summed) before each call;
- ``rotate``: a cycle over distinct weight matrices totalling >= 4x the L2, no flush (a decode step).

    python3 -m sim.calibrate.gpu.gemm_l2_states --out DIR [--budget-s 90]

Writes DIR/gemm_l2_states.json (meta, records). torch only; never changes GPU settings.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import time
from typing import Any

from sim.calibrate.gpu.common import ResultFile, collect_meta, guarded, log

SHAPES = [  # (m, n, k): decode-style weights of 8..117 MB in bf16
    (1, 4096, 4096), (8, 4096, 4096), (16, 4096, 4096), (32, 4096, 4096), (64, 4096, 4096),
    (1, 8192, 2048), (8, 8192, 2048), (8, 2048, 8192), (1, 14336, 4096), (16, 14336, 4096),
    (1, 4096, 14336), (16, 4096, 14336), (4, 6144, 4096), (4, 4096, 4096 * 3),
]
STATES = ("warm", "dirty", "clean", "rotate")
BUF_BYTES = 256 * 1024 * 1024
CALLS = 12


def _kernel_durations(prof: Any) -> list[dict[str, Any]]:
    out = []
    for ev in prof.events():
        dev = getattr(ev, "device_type", None)
        if dev is not None and "CUDA" in str(dev) and getattr(ev, "device_time", 0) > 0:
            out.append({"name": ev.name, "us": float(ev.device_time)})
    return out


def measure(m: int, n: int, k: int, state: str) -> dict[str, Any]:
    import torch

    dt = torch.bfloat16
    x = torch.randn(m, k, device="cuda", dtype=dt)
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    w_bytes = n * k * 2
    count = max(1, -(-4 * l2 // w_bytes)) if state == "rotate" else 1
    ws = [torch.randn(k, n, device="cuda", dtype=dt) for _ in range(count)]
    buf = torch.empty(BUF_BYTES // 4, device="cuda", dtype=torch.float32) if state in ("dirty", "clean") else None
    sink = torch.empty((), device="cuda", dtype=torch.float32)

    def prep(i: int) -> None:
        if state == "dirty":
            assert buf is not None
            buf.fill_(float(i))
        elif state == "clean":
            assert buf is not None
            sink.copy_(buf.sum())

    for i in range(3):  # warm-up (cuBLAS heuristics, allocator)
        prep(i)
        torch.matmul(x, ws[i % count])
    torch.cuda.synchronize()
    from torch.profiler import ProfilerActivity, profile

    n_calls = CALLS * max(1, min(count, 4))
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for i in range(n_calls):
            prep(i)
            torch.matmul(x, ws[i % count])
        torch.cuda.synchronize()
    evs = _kernel_durations(prof)
    # every kernel a matmul launches (cuBLAS's split-K runs a GEMM kernel and a reduction kernel)
    gemm = [e for e in evs if any(s in e["name"].lower() for s in ("nvjet", "gemm", "gemv", "cutlass", "splitk"))]
    by_name: dict[str, list[float]] = {}
    for e in gemm:
        by_name.setdefault(e["name"], []).append(e["us"])
    kernels = [{"name": name, "launches": len(us), "median_us": statistics.median(us)} for name, us in sorted(by_name.items())]
    per_call = sum(e["us"] for e in gemm) / n_calls if gemm else None
    return {"bench": "gemm_l2_state", "m": m, "n": n, "k": k, "dtype": "bfloat16", "state": state,
            "weight_bytes": w_bytes, "weight_matrices": count, "l2_bytes": l2, "calls": n_calls,
            "per_call_us": per_call, "kernels": kernels}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget-s", type=float, default=90.0, help="stop starting new shapes after this")
    ap.add_argument("--dry-run", action="store_true", help="print the plan, measure nothing")
    ns = ap.parse_args()
    if ns.dry_run:
        print(f"{len(SHAPES)} shapes x {len(STATES)} states, budget {ns.budget_s} s, out {ns.out}")
        return
    os.makedirs(ns.out, exist_ok=True)
    t0 = time.time()
    rf = ResultFile(os.path.join(ns.out, "gemm_l2_states.json"), "gemm_l2_states", collect_meta())
    for m, n, k in SHAPES:
        if time.time() - t0 > ns.budget_s:
            log(f"budget reached after {time.time() - t0:.0f} s")
            rf.close("partial")
            return
        for state in STATES:
            rec = guarded(rf, f"{m}x{n}x{k} {state}", functools.partial(measure, m, n, k, state))
            if rec:
                rf.add(rec)
                log(f"{m}x{n}x{k} {state}: {rec['per_call_us']:.2f} us per call, {len(rec['kernels'])} kernel(s) ({rec['weight_matrices']} matrices)")
    rf.close()


if __name__ == "__main__":
    main()
