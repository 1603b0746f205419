"""Flash-style attention: forward, backward, causal or not, and decode over a KV cache.

Prefill/training (query length > 1): work is tiles of 128 queries × 128 keys. FLOPs are
4·b·h·sq·skv·d forward (QKᵀ and PV) and 2.5× that backward (five matmuls to two). A causal
mask skips the tiles above the diagonal, but a tile on it is computed whole: the computed
share is (n+1)/(2n) for n tiles per side, not ½. Each query tile's pipeline is filled and
drained once, so short key lengths run below peak: efficiency × skv / (skv + k_half) (the
same prologue/epilogue cost as a GEMM's K loop). Few query tiles leave SMs idle.

Decode (query length 1) streams the K/V cache. The kernel runs one block per (batch, head)
and splits the keys into more blocks when that is too few to fill the GPU; its bandwidth
is the sustained bandwidth times the share of SMs its grid fills, corrected near calibrated
shapes by the measured/model ratio (the library picks kernels by shape).
"""

from __future__ import annotations

import math
from types import MappingProxyType

from sim.costmodel import KernelCost
from sim.costmodel.corrections import interpolate
from sim.costmodel.elementwise import io_bytes
from sim.costmodel.gemm import _peak
from sim.errors import KernelsimError
from sim.graph import Graph, Op
from sim.hardware import Hardware

# NB: the query tile, the decode kernels' key chunk and their blocks per SM are the libraries'
# heuristics, in the profile's `library.attention` (hw.library). Decode kernels (FlashDecoding-style;
# cuDNN's SDPA decode path) run a block per (batch, head) and split the keys in chunks until about
# that many blocks per SM; what the library does beyond that per shape is in the profile's
# calibrated `corrections.attention_decode` table.


def causal_share(sq: int, skv: int, query_tile: int, key_tile: int | None = None) -> float:
    """Share of the score tiles a causal kernel computes: query tile i (of `query_tile` queries) runs
    every key tile (of `key_tile` keys, default the query tile) up to the one holding its last query;
    a tile crossing the diagonal runs whole."""
    n = max(1, math.ceil(max(sq, skv) / query_tile))
    if key_tile is None or key_tile == query_tile:
        return (n + 1) / (2 * n)
    nk = max(1, math.ceil(max(sq, skv) / key_tile))
    return sum(min(nk, math.ceil((i + 1) * query_tile / key_tile)) for i in range(n)) / (n * nk)


def decode_model_s(hw: Hardware, nbytes: float, heads: int, skv: int) -> tuple[float, int, int]:
    """Analytic decode time before the calibrated correction: (seconds, grid, kv splits)."""
    lib = hw.library
    splits = max(1, min(math.ceil(lib.attention_decode_blocks_per_sm * hw.sm_count / heads),
                        math.ceil(skv / lib.attention_decode_kv_chunk)))
    grid = heads * splits
    fill = min(1.0, grid / hw.sm_count)
    return hw.kernel_fixed_s + hw.mem_latency_s + nbytes / (hw.hbm_sustained_bps * fill), grid, splits


def _decode_cost(op: Op, graph: Graph, hw: Hardware, b: int, h: int, skv: int) -> KernelCost:
    r, w = io_bytes(op, graph)
    model_s, grid, splits = decode_model_s(hw, r + w, b * h, skv)
    corr = interpolate(hw.corrections.get("attention_decode", ()), (b * h, skv))
    time = hw.kernel_fixed_s + (model_s - hw.kernel_fixed_s) * corr
    return KernelCost(
        time_s=time, compute_s=0.0, memory_s=time - hw.kernel_fixed_s, fixed_s=hw.kernel_fixed_s,
        limiter="hbm" if grid >= hw.sm_count else "tail", category="memory",
        hbm_bytes=r + w, flops=4.0 * b * h * skv * float(op.attrs["head_dim"]),
        bw_demand=min(1.0, (r + w) / time / hw.hbm_sustained_bps), sm_demand=min(1.0, grid / hw.sm_count),
        detail=MappingProxyType({"grid": grid, "kv_splits": splits, "correction": round(corr, 4)}),
    )


def attention_cost(op: Op, graph: Graph, hw: Hardware) -> KernelCost:
    b, h = int(op.attrs["batch"]), int(op.attrs["heads"])
    sq, skv, d = int(op.attrs["seq_q"]), int(op.attrs["seq_kv"]), int(op.attrs["head_dim"])
    if min(b, h, sq, skv, d) <= 0:
        raise KernelsimError(f"op '{op.name}': attention dimensions must be positive "
                             f"(batch={b}, heads={h}, seq_q={sq}, seq_kv={skv}, head_dim={d})")
    causal = bool(op.attrs.get("causal", False))
    fwd = op.attrs.get("direction", "forward") == "forward"
    if sq == 1 and fwd:
        return _decode_cost(op, graph, hw, b, h, skv)
    backend = str(op.attrs.get("backend") or hw.attention_default_backend)
    measured = hw.attention_backends.get(backend)
    query_tile = hw.library.attention_query_tile
    key_tile = measured[3] if measured is not None else query_tile
    share = causal_share(sq, skv, query_tile, key_tile) if causal and sq > 1 else 1.0
    flops = 4.0 * b * h * sq * skv * d * share
    if not fwd:
        flops *= 2.5
    ramp = skv / (skv + hw.gemm_k_half)
    tiles = b * h * max(1, math.ceil(sq / query_tile))
    fill = min(1.0, tiles / hw.sm_count)
    side_s = 0.0
    if measured is not None:
        # matmuls at the backend's efficiency, in turn with the score elements' softmax work per SM
        eff, score_fwd_s, score_bwd_s, _ = measured
        score_s = b * h * sq * skv * share * (score_fwd_s if fwd else score_bwd_s) / (hw.sm_count * fill)
        compute_s = flops / (_peak(hw, op.attrs.get("dtype", "bf16")) * eff * ramp * fill) + score_s
        if not fwd and "trace_name" not in op.attrs:
            # NB: the backward is three kernels: rowsum(dO * O) before the main kernel (reads O and dO,
            # writes a float per row) and dQ's fp32 accumulator converted to bf16 after it. An op
            # imported from a trace is the main kernel alone (trace_name): the importer keeps the
            # two side kernels as their own ops with their measured time.
            rows_d = b * h * sq * d
            side_s = 2 * hw.kernel_fixed_s + (2 * rows_d * 2 + b * h * sq * 4 + rows_d * 6) / hw.hbm_sustained_bps
    else:
        eff = hw.attention_fwd_eff if fwd else hw.attention_bwd_eff
        compute_s = flops / (_peak(hw, op.attrs.get("dtype", "bf16")) * eff * ramp * fill)
    r, w = io_bytes(op, graph)
    hbm = r + w
    memory_s = hbm / hw.hbm_sustained_bps + hw.mem_latency_s
    body = max(compute_s, memory_s)
    time = hw.kernel_fixed_s + body + side_s
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
        detail=MappingProxyType({"tiles": tiles, "fill": round(fill, 4), "efficiency": eff, "ramp": round(ramp, 4),
                                 "backend": backend if measured is not None else "flash"}),
    )
