"""Collectives: ring alpha–beta costs over the profile's links.

Ring all-reduce of S bytes over n ranks: 2(n−1) steps of latency α and 2(n−1)/n · S bytes
per rank over the link; all-gather and reduce-scatter half of that; all-to-all (n−1)/n · S;
broadcast pipelined S; send/recv S. One rank: only the kernel's fixed cost.
"""

from __future__ import annotations

from types import MappingProxyType

from sim.costmodel import KernelCost, register
from sim.graph import Graph, Op
from sim.hardware import Hardware

_STEPS_AND_FACTOR = {
    "all_reduce": (lambda n: 2 * (n - 1), lambda n: 2 * (n - 1) / n),
    "all_gather": (lambda n: n - 1, lambda n: (n - 1) / n),
    "reduce_scatter": (lambda n: n - 1, lambda n: (n - 1) / n),
    "all_to_all": (lambda n: n - 1, lambda n: (n - 1) / n),
    "broadcast": (lambda n: n - 1, lambda n: 1.0),
    "send_recv": (lambda n: 1, lambda n: 1.0),
}


@register("collective")
def collective_cost(op: Op, graph: Graph, hw: Hardware) -> KernelCost:
    n = int(op.attrs["ranks"])
    size = float(op.attrs["bytes"])
    kind = op.attrs["collective"]
    if n <= 1:
        t = hw.kernel_fixed_s
        return KernelCost(t, 0.0, 0.0, t, "launch", "comm", 0.0, sm_demand=0.0)
    steps_fn, factor_fn = _STEPS_AND_FACTOR[kind]
    if hw.nvlink_bps > 0:
        bw, alpha = hw.nvlink_bps, hw.nvlink_latency_s
    else:
        bw, alpha = hw.pcie_bps, hw.nvlink_latency_s
    steps = steps_fn(n)
    wire = factor_fn(n) * size
    comm_s = steps * alpha + wire / (bw * hw.comm_efficiency)
    time = hw.kernel_fixed_s + comm_s
    return KernelCost(
        time_s=time,
        compute_s=0.0,
        memory_s=comm_s,
        fixed_s=hw.kernel_fixed_s,
        limiter="link",
        category="comm",
        hbm_bytes=2 * size,
        bw_demand=min(1.0, 2 * size / time / hw.hbm_sustained_bps),
        sm_demand=0.1,
        detail=MappingProxyType({"ranks": n, "wire_bytes": wire, "steps": steps}),
    )
