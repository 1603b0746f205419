"""Which kernels PyTorch launches for reductions and normalizations, with their launch configs.

    python3 -m sim.calibrate.gpu.kernel_configs --out DIR

For layer norm (forward, backward), softmax (forward, backward), column sums and row sums over a
grid of shapes, one profiled call records every GPU kernel's name, duration, grid, block,
registers and shared memory (torch.profiler). Also a read-only streaming kernel (a large sum)
to see the read-only bandwidth ceiling. Writes DIR/kernel_configs.json.

`--tiny-calls N` (default 8) adds, per shape, a record `bench: tiny_kernels`: layer norm backward
called N times in one profiling session, with the profiled duration and grid of every kernel of at
most 4 blocks it launches (its small elementwise kernel). Those durations are the device part of
`kernel.fixed_us`; one call per shape gave 5 single samples on the 32-ns profiler clock, whose median
moved by two ticks between machines (runs/W: 1.024 us, 9 of 11 calibrations 0.96).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from . import common


def profile_kernels(fn: Any) -> list[dict[str, Any]]:
    import torch
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    out = []
    for e in prof.events():
        if e.device_type != torch.autograd.DeviceType.CUDA:
            continue
        out.append({"name": e.name[:160], "duration_us": round(e.device_time_total, 3)})
    # launch configs come from the trace's args (grid, block, registers per thread, shared memory)
    path = "/tmp/ks_kc_trace.json"
    prof.export_chrome_trace(path)
    with open(path) as fh:
        events = [ev for ev in json.load(fh)["traceEvents"] if ev.get("cat") == "kernel"]
    for rec, ev in zip(out, events, strict=False):
        a = ev.get("args", {})
        rec.update({"grid": a.get("grid"), "block": a.get("block"), "registers_per_thread": a.get("registers per thread"),
                    "shared_memory": a.get("shared memory"), "trace_dur_us": ev.get("dur")})
    return out


TINY_BLOCKS = 4  # kernels of at most this many blocks: the fixed cost's device part (sim.calibrate.fit.fit_copy)


def tiny_kernel_samples(fn: Any, calls: int) -> list[dict[str, Any]]:
    """Every kernel of at most TINY_BLOCKS blocks over `calls` calls of fn in one profiling session
    (after one call outside it): name, grid and profiled duration, in launch order."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from .trace_utils import export_trace, gpu_events

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    return tiny_kernels(gpu_events(export_trace(prof)))


def tiny_kernels(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The kernels (trace_utils.gpu_events) of at most TINY_BLOCKS blocks: name, grid, duration."""
    out = []
    for e in events:
        grid = e.get("grid")
        if e.get("kind") == "kernel" and isinstance(grid, list) and len(grid) == 3 and grid[0] * grid[1] * grid[2] <= TINY_BLOCKS:
            out.append({"name": str(e.get("name") or "")[:160], "grid": grid, "duration_us": round(e["duration_us"], 3)})
    return out


def run(out_dir: str, tiny_calls: int = 8) -> None:
    import torch
    import torch.nn.functional as F

    bf = torch.bfloat16
    records: list[dict[str, Any]] = []
    for rows, cols in ((512, 1024), (2048, 4096), (8192, 1024), (8192, 4096), (8192, 16384), (32768, 2048)):
        x = torch.randn(rows, cols, device="cuda", dtype=bf, requires_grad=True)
        w = torch.randn(cols, device="cuda", dtype=bf, requires_grad=True)
        gy = torch.randn(rows, cols, device="cuda", dtype=bf)
        y = F.layer_norm(x, (cols,), w, w)
        cases = {
            "layernorm_fwd": lambda x=x, w=w, cols=cols: F.layer_norm(x, (cols,), w, w),
            "layernorm_bwd": lambda y=y, gy=gy, x=x, w=w: torch.autograd.grad(y, (x, w), gy, retain_graph=True),
            "softmax_fwd": lambda x=x: torch.softmax(x, -1),
            "sum_dim0": lambda gy=gy: gy.sum(0),
            "sum_dim1": lambda gy=gy: gy.sum(1),
        }
        for name, fn in cases.items():
            try:
                ks = profile_kernels(fn)
                records.append({"bench": name, "rows": rows, "cols": cols, "dtype": "bfloat16", "kernels": ks})
                common.log(f"{name} {rows}x{cols}: " + "; ".join(f"{k['name'][:50]} {k['duration_us']}us grid={k.get('grid')} "
                                                                 f"block={k.get('block')} regs={k.get('registers_per_thread')}"
                                                                 for k in ks))
            except Exception as exc:  # noqa: BLE001 - recorded, not fatal
                records.append({"bench": name, "rows": rows, "cols": cols, "error": str(exc)})
        if tiny_calls > 0:
            try:
                tiny = tiny_kernel_samples(cases["layernorm_bwd"], tiny_calls)
                records.append({"bench": "tiny_kernels", "source": "layernorm_bwd", "rows": rows, "cols": cols,
                                "dtype": "bfloat16", "calls": tiny_calls, "kernels": tiny})
                common.log(f"tiny kernels of layernorm_bwd {rows}x{cols} over {tiny_calls} calls: "
                           + " ".join(f"{k['duration_us']}" for k in tiny))
            except Exception as exc:  # noqa: BLE001 - recorded, not fatal
                records.append({"bench": "tiny_kernels", "rows": rows, "cols": cols, "error": str(exc)})
    big = torch.randn(1 << 30, device="cuda", dtype=bf)  # 2 GiB, read once
    r = common.bench(lambda i: big.sum(), flush=True)
    records.append({"bench": "read_only_sum", "bytes": 2 << 30, **r, "gbps": (2 << 30) / (r["time_us"] * 1e-6) / 1e9,
                    "kernels": profile_kernels(lambda: big.sum())})
    common.log(f"read-only sum 2 GiB: {records[-1]['gbps']:.0f} GB/s")
    common.write_group(out_dir, "kernel_configs", records, "sim.calibrate.gpu.kernel_configs")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", required=True)
    ap.add_argument("--tiny-calls", type=int, default=8,
                    help="profiled calls of layer norm backward per shape for the tiny-kernel samples (0: none)")
    ns = ap.parse_args()
    run(ns.out, ns.tiny_calls)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
