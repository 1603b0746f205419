"""Per-kernel figures of one simulated step, the Speed-of-Light view (`kernelsim run --kernels`).

For each kernel of a Trace: its predicted time running alone, achieved HBM bandwidth and FLOP
rate, each as a share of the profile's peak (HBM peak bandwidth; tensor-core peak of the dtype for
GEMM and attention, the FP32 pipes otherwise), occupancy and registers per thread where the cost
model computed them (library GEMMs do not expose theirs: "—"), and the limiter. Read from the
Trace's costs, never recomputed.
"""

from __future__ import annotations

from typing import Any

from sim.hardware import Hardware
from sim.trace import Trace


def peak_flops(hw: Hardware, kind: str, dtype: str) -> float:
    """FLOP/s at peak for an op kind and dtype on this profile."""
    fp32 = 2.0 * hw.fp32_lanes_per_sm * hw.sm_count * hw.clock_hz
    if kind in ("gemm", "attention") and dtype != "fp32":
        return hw.tensor_flops.get(dtype, fp32)
    return fp32


def kernel_rows(trace: Trace, hw: Hardware) -> list[dict[str, Any]]:
    """One dict per kernel in start order (JSON-ready; units in the key names)."""
    rows: list[dict[str, Any]] = []
    for iv in sorted(trace.kernels(), key=lambda k: (k.start_s, k.track)):
        if iv.op < 0:
            continue
        cost = trace.costs[iv.op]
        if cost is None:
            continue
        op = trace.graph.ops[iv.op]
        t = cost.time_s
        gbps = cost.hbm_bytes / t / 1e9 if t > 0 else 0.0
        flops_s = cost.flops / t if t > 0 else 0.0
        detail = dict(cost.detail)
        occ = detail.get("occupancy")
        regs = detail.get("regs_per_thread")
        rows.append({
            "kernel": op.name,
            "kind": op.kind,
            "time_us": t * 1e6,
            "stream_time_us": iv.duration_s * 1e6,
            "hbm_bytes": cost.hbm_bytes,
            "flops": cost.flops,
            "achieved_gbps": gbps,
            "achieved_tflops": flops_s / 1e12,
            "hbm_peak_share": gbps * 1e9 / hw.hbm_peak_bps,
            "compute_peak_share": flops_s / peak_flops(hw, op.kind, str(op.attrs.get("dtype", "bf16"))),
            "occupancy": None if occ is None else float(occ),
            "regs_per_thread": None if regs is None else int(regs),
            "limiter": cost.limiter,
        })
    return rows
