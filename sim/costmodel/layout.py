"""Copies, layout transforms and reductions: streaming kernels with their own bandwidth factors.

A transpose reads and writes every byte but cannot coalesce both sides as well as a copy:
its bandwidth is the profile's `layout_bandwidth_factor` of a copy's. A reduction reads its
input `passes` times. Copies on the copy engine run over PCIe (H2D/D2H) and take no SMs.
"""

from __future__ import annotations

import math

from sim.costmodel import KernelCost, register
from sim.costmodel.elementwise import io_bytes, numel_of, read_bytes_per_elem, streaming_cost
from sim.graph import Graph, LaunchConfig, Op
from sim.hardware import Hardware

# NB: a copy with no launch config is the driver's memcpy kernel (cudaMemcpyAsync D2D):
# 128-thread blocks, each thread moving four 16-byte vectors (estimate).
MEMCPY_LAUNCH = LaunchConfig(block=128, elems_per_thread=32, regs_per_thread=32)


@register("copy")
def copy_cost(op: Op, graph: Graph, hw: Hardware) -> KernelCost:
    r, w = io_bytes(op, graph)
    nbytes = float(op.attrs.get("bytes", r + w))
    direction = op.attrs.get("direction", "d2d")
    if direction in ("h2d", "d2h") or op.attrs.get("engine") == "copy_engine":
        bw = hw.pcie_bps if direction in ("h2d", "d2h") else hw.hbm_sustained_bps
        payload = nbytes if direction in ("h2d", "d2h") else nbytes / 2
        t = hw.kernel_fixed_s + payload / bw
        return KernelCost(
            time_s=t, compute_s=0.0, memory_s=t - hw.kernel_fixed_s, fixed_s=hw.kernel_fixed_s,
            limiter="link" if direction != "d2d" else "hbm", category="memory", hbm_bytes=payload,
            bw_demand=min(1.0, payload / t / hw.hbm_sustained_bps), sm_demand=0.0,
        )
    numel = max(1, int(nbytes // 4))  # bf16 elements: 2 bytes read + 2 written each
    if op.launch is None:
        op = op.with_(launch=MEMCPY_LAUNCH)
    return streaming_cost(
        op, graph, hw, numel=numel, bytes_read=nbytes / 2, bytes_written=nbytes / 2,
        inflight_per_elem=2.0, math_ops={},
    )


@register("layout")
def layout_cost(op: Op, graph: Graph, hw: Hardware) -> KernelCost:
    numel = numel_of(op, graph)
    r, w = io_bytes(op, graph)
    factor = 1.0 if op.attrs.get("transform") == "cast" else hw.layout_bw_factor
    return streaming_cost(
        op, graph, hw, numel=numel, bytes_read=r, bytes_written=w,
        inflight_per_elem=read_bytes_per_elem(op, graph, numel), math_ops={},
        category="layout", bandwidth_factor=factor,
    )


# NB: PyTorch's row reductions (layer norm, softmax) run one 128-thread block per row; each
# thread loops over its share of the row with a carried dependency (running sums), so it keeps
# one 16-byte vector in flight. Column reductions (sum over rows) spread columns over blocks.
REDUCTION_THREADS = 128
REDUCTION_INFLIGHT_BYTES = 16


@register("reduction")
def reduction_cost(op: Op, graph: Graph, hw: Hardware) -> KernelCost:
    """Reads its input `passes` times (e.g. statistics, then normalize); writes once."""
    rows, cols = int(op.attrs["rows"]), int(op.attrs["cols"])
    passes = float(op.attrs.get("passes", 1))
    numel = rows * cols
    r, w = io_bytes(op, graph)
    if op.attrs.get("axis", "cols") == "cols":
        default_grid = rows
    else:
        # NB: column sums (bias gradients): blocks of 32 × 4 threads cover 128 columns; when
        # each thread would sum more than 256 rows, PyTorch splits the rows over enough blocks
        # to put about 16 on every SM (H200 traces: grid 128 × 1 at 1001 rows, 128 × 17 at 2048+).
        col_blocks = max(1, math.ceil(cols / REDUCTION_THREADS))
        splits = 1 if rows <= 1024 else max(1, math.ceil(16 * hw.sm_count / col_blocks))
        default_grid = col_blocks * splits
    if op.launch is None:
        op = op.with_(launch=LaunchConfig(block=REDUCTION_THREADS))
    return streaming_cost(
        op, graph, hw, numel=numel, bytes_read=r * passes, bytes_written=w,
        inflight_per_elem=read_bytes_per_elem(op, graph, numel), math_ops=op.attrs.get("math", {}),
        inflight_cap=REDUCTION_INFLIGHT_BYTES, default_grid=default_grid,
    )
