"""Flash-style attention: forward, backward, causal or not, and decode over a KV cache.

FLOPs: forward 4·b·h·sq·skv·d (QKᵀ and PV), halved when causal with sq = skv; backward
2.5× forward (five matmuls to two). Bytes: the op's tensors once (Q, K, V, O and their
gradients). Decode (sq = 1) is therefore bound by reading the cache. Efficiency per
direction comes from the profile (measured on the device where calibrated).
"""

from __future__ import annotations

from types import MappingProxyType

from sim.costmodel import KernelCost, register
from sim.costmodel.elementwise import io_bytes
from sim.costmodel.gemm import _peak
from sim.graph import Graph, Op
from sim.hardware import Hardware


@register("attention")
def attention_cost(op: Op, graph: Graph, hw: Hardware) -> KernelCost:
    b, h = op.attrs["batch"], op.attrs["heads"]
    sq, skv, d = op.attrs["seq_q"], op.attrs["seq_kv"], op.attrs["head_dim"]
    causal = bool(op.attrs.get("causal", False))
    fwd = op.attrs.get("direction", "forward") == "forward"
    flops = 4.0 * b * h * sq * skv * d
    if causal and sq > 1:
        flops *= 0.5
    if not fwd:
        flops *= 2.5
    eff = hw.attention_fwd_eff if fwd else hw.attention_bwd_eff
    # Work is spread over (batch × heads × query tiles of 128); few tiles leave SMs idle.
    tiles = b * h * max(1, -(-int(sq) // 128))
    fill = min(1.0, tiles / hw.sm_count)
    compute_s = flops / (_peak(hw, op.attrs.get("dtype", "bf16")) * eff * fill)
    r, w = io_bytes(op, graph)
    hbm = r + w
    memory_s = hbm / hw.hbm_sustained_bps + hw.mem_latency_s
    body = max(compute_s, memory_s)
    time = hw.kernel_fixed_s + body
    limiter = ("tensor_core" if fill >= 1 else "tail") if compute_s >= memory_s else "hbm"
    return KernelCost(
        time_s=time,
        compute_s=compute_s,
        memory_s=memory_s,
        fixed_s=hw.kernel_fixed_s,
        limiter=limiter,
        category="compute" if compute_s >= memory_s else "memory",
        hbm_bytes=hbm,
        flops=flops,
        bw_demand=min(1.0, hbm / time / hw.hbm_sustained_bps),
        sm_demand=fill,
        detail=MappingProxyType({"tiles": tiles, "fill": round(fill, 4), "efficiency": eff}),
    )
