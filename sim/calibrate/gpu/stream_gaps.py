"""Idle gaps between back-to-back kernels on one stream (the per-kernel stream gap).

    python3 -m sim.calibrate.gpu.stream_gaps --out DIR

Profiles (torch.profiler, CUDA activity) a few eager MLP training steps
(Linear 4096->16384 + bias + GELU + dropout + Linear 16384->4096, bf16, 2048 tokens) issued far
ahead of the GPU (the host never starves the stream at this size), and records every idle gap
shorter than 5 us between consecutive GPU activities of the stream: the time the GPU needs
between one kernel's end and the next kernel's start when the next one is already queued.
Writes DIR/stream_gaps.json with records {bench: stream_gap, after, before, gap_us}. The same
rule produced the first committed stream_gaps.json from tests/fixtures/traces/mlp_eager.json.gz.
"""

from __future__ import annotations

import argparse
from typing import Any

from . import common
from .trace_utils import export_trace, gpu_events

GAP_LIMIT_US = 5.0


def run(out_dir: str, steps: int = 3) -> dict[str, Any]:
    import torch
    import torch.nn.functional as F

    bf = torch.bfloat16
    T, D, H = 2048, 4096, 16384
    x = torch.randn(T, D, device="cuda", dtype=bf)
    w1 = torch.randn(H, D, device="cuda", dtype=bf, requires_grad=True)
    b1 = torch.randn(H, device="cuda", dtype=bf, requires_grad=True)
    w2 = torch.randn(D, H, device="cuda", dtype=bf, requires_grad=True)
    b2 = torch.randn(D, device="cuda", dtype=bf, requires_grad=True)
    gy = torch.randn(T, D, device="cuda", dtype=bf)

    def step() -> None:
        h = F.dropout(F.gelu(F.linear(x, w1, b1)), 0.1, training=True)
        y = F.linear(h, w2, b2)
        y.backward(gy)
        for p in (w1, b1, w2, b2):
            p.grad = None

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    common.warm_gpu(0.5)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    ev = gpu_events(export_trace(prof))
    records: list[dict[str, Any]] = []
    by_stream: dict[Any, list[dict[str, Any]]] = {}
    for e in ev:
        by_stream.setdefault(e["stream"], []).append(e)
    for evs in by_stream.values():
        for a, b in zip(evs, evs[1:], strict=False):
            gap = b["ts_us"] - (a["ts_us"] + a["duration_us"])
            if 0.0 <= gap < GAP_LIMIT_US:
                records.append({"bench": "stream_gap", "after": (a["name"] or "")[:60],
                                "before": (b["name"] or "")[:60], "gap_us": round(gap, 4)})
    common.log(f"stream_gaps: {len(records)} gaps from {len(ev)} GPU events")
    return common.write_group(out_dir, "stream_gaps", records, "sim.calibrate.gpu.stream_gaps")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="folder for stream_gaps.json")
    ap.add_argument("--steps", type=int, default=3, help="profiled steps (default 3)")
    ns = ap.parse_args(argv)
    run(ns.out, ns.steps)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
