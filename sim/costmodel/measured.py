"""Measured ops: an imported kernel priced from its trace measurement rather than the cost model."""

from __future__ import annotations

from sim.graph import Op
from sim.kernelcost import KernelCost

_MEASURED_CATEGORY = {"gemm": "compute", "attention": "compute", "collective": "comm", "layout": "layout"}


def measured_cost(op: Op) -> KernelCost:
    """An imported kernel's cost from its trace measurement (attrs `measured_us`, `device_gap_us`).

    The measured duration already includes contention with concurrent kernels, so it
    demands no shared bandwidth or SMs; the stream's idle gap before an already-queued
    kernel is its fixed per-kernel cost.
    """
    gap_s = float(op.attrs.get("device_gap_us", 0.0)) * 1e-6
    busy_s = float(op.attrs["measured_us"]) * 1e-6
    category = _MEASURED_CATEGORY.get(str(op.attrs.get("family", op.kind)), "memory")
    return KernelCost(time_s=busy_s + gap_s, compute_s=0.0, memory_s=0.0, fixed_s=gap_s, limiter="measured",
                      category=category, hbm_bytes=0.0, bw_demand=0.0, sm_demand=0.0)
