"""Collectives: NCCL-like alpha–beta costs over the profile's topology (sim.costmodel.nccl).

An op carries `collective`, `bytes` (the nccl-tests size: the whole buffer) and `ranks`
(the group's size); `nodes` (nodes the group spans) is set by the multi-rank runner from
the placement, else ranks are taken as packed node by node. Optional `channels`,
`algorithm` and `protocol` force NCCL's choices (like NCCL_MIN/MAX_NCHANNELS, NCCL_ALGO,
NCCL_PROTO). One rank: only the kernel's fixed cost.

The cost alone (no contention) is kernel fixed cost + latency + transfer. While it runs the
kernel holds one CTA per channel, each on its own SM (sm_demand = channels / SMs), and
streams its HBM traffic (bw_demand); where the profile measured how many SMs each channel takes from
the kernels beside it (topology.sms_lost_per_channel), `detail` says so (taken_sm, sm_count) and the
engine runs those kernels in rounds over the SMs left (`rounds_beside`); `detail` carries the plan (algorithm, protocol,
latency, transfer, link shares) for the engine's rendezvous and link sharing.
"""

from __future__ import annotations

from types import MappingProxyType

from sim.costmodel import KernelCost
from sim.costmodel.nccl import Links, busbw_factor, plan_collective
from sim.errors import InfeasibleError
from sim.graph import Graph, Op
from sim.hardware import Hardware
from sim.kernelcost import rounds_beside  # noqa: F401 - the rule the engine applies to the cost's taken_sm
from sim.topology import nodes_for


def links_of(hw: Hardware) -> Links:
    """Effective per-GPU link rates of a profile: NVLink (or PCIe) × comm_efficiency, NIC × network_efficiency."""
    topo = hw.fabric
    if hw.nvlink_bps > 0 and topo.intra_node != "pcie":
        intra, kind = hw.nvlink_bps, "nvlink"
    else:
        intra, kind = hw.pcie_bps, "pcie"
    return Links(intra_bps=intra * hw.comm_efficiency, intra_kind=kind, nic_bps=hw.network_bps * topo.network_efficiency,
                 nccl=hw.library.nccl)


def collective_cost(op: Op, graph: Graph, hw: Hardware) -> KernelCost:
    n = int(op.attrs.get("ranks", 1))
    size = float(op.attrs["bytes"])
    kind = str(op.attrs["collective"])
    if n <= 1:
        t = hw.kernel_fixed_s
        return KernelCost(t, 0.0, 0.0, t, "launch", "comm", 0.0, sm_demand=0.0,
                          detail=MappingProxyType({"ranks": n, "latency_s": 0.0, "transfer_s": 0.0}))
    topo = hw.fabric
    m = int(op.attrs["nodes"]) if "nodes" in op.attrs else nodes_for(n, topo)
    channels = int(op.attrs["channels"]) if "channels" in op.attrs else None
    try:
        plan = plan_collective(kind, size, n, m, links_of(hw), topo, channels=channels,
                               algorithm=str(op.attrs.get("algorithm", "auto")),
                               protocol=str(op.attrs.get("protocol", "auto")))
    except ValueError as exc:
        raise InfeasibleError(f"collective '{op.name}': {exc}") from None
    comm_s = plan.time_s
    time = hw.kernel_fixed_s + comm_s
    # SMs the collective's CTAs take from the kernels beside it (measured per channel where the
    # profile says; the engine then prices a GEMM beside it by rounds_beside)
    lost = topo.sms_lost_per_channel
    beside: dict[str, float] = ({} if lost is None else
                                {"taken_sm": min(1.0, plan.channels * lost / hw.sm_count), "sm_count": hw.sm_count})
    if topo.collective_start_s > 0:  # the engine starts its CTAs this long after its stream reaches it
        beside["start_s"] = topo.collective_start_s
    if topo.release_loss_units is not None:  # a GEMM started beside it: sim.kernelcost.release_loss
        beside.update({"release_loss_units": topo.release_loss_units, "sm_count": hw.sm_count})
    return KernelCost(
        time_s=time,
        compute_s=0.0,
        memory_s=comm_s,
        fixed_s=hw.kernel_fixed_s,
        limiter="link",
        category="comm",
        hbm_bytes=plan.hbm_bytes,
        bw_demand=min(1.0, plan.hbm_bytes / plan.transfer_s / hw.hbm_sustained_bps) if plan.transfer_s > 0 else 0.0,
        sm_demand=min(1.0, plan.channels / hw.sm_count),
        detail=MappingProxyType({
            "ranks": n, "nodes": m, "algorithm": plan.algorithm, "protocol": plan.protocol, "channels": plan.channels,
            "latency_s": plan.latency_s, "transfer_s": plan.transfer_s, "busbw_gbps": plan.busbw_bps / 1e9,
            "intra_share": plan.intra_share, "net_share": plan.net_share,
            "wire_bytes": busbw_factor(kind, n) * size, **beside,
        }),
    )
