"""Reductions and normalizations: row-wise (layer norm, softmax, row sums) and column sums.

Row-wise kernels run one block per row, or several rows per block (the launch's
`threads_per_row` and `rows_per_block`, e.g. a warp per row: 32 × 4 in a block of 128). A block
makes `passes` sweeps over its row (e.g. statistics, then normalize; softmax: max, sum of
exponentials, write), and every sweep ends in a reduction across the row's threads: log2
steps of shuffles and barriers that cannot overlap the next sweep's loads. The GPU runs the
blocks in waves of `SMs × blocks per SM`; each sweep of a wave takes the longer of one
memory round trip plus the reduction and the wave's bytes at the bandwidth its bytes in
flight allow (one 16-byte vector per thread: the loop carries running sums).

Column sums (bias gradients) spread columns over blocks and split the rows over more
blocks when the sum is long; they stream like any elementwise kernel.
"""

from __future__ import annotations

import math
from types import MappingProxyType

from sim.costmodel import KernelCost, register
from sim.costmodel.elementwise import (
    compute_time,
    estimate_registers,
    io_bytes,
    read_bytes_per_elem,
    streaming_cost,
)
from sim.costmodel.memory import bandwidth
from sim.errors import KernelsimError
from sim.graph import Graph, LaunchConfig, Op
from sim.hardware import Hardware, occupancy

# NB: PyTorch's defaults (H200 traces, torch 2.11): layer norm and most row reductions run
# 128 threads per row; column sums blocks of 32 × 4 threads covering 128 columns.
REDUCTION_THREADS = 128
VECTOR_BYTES = 16


def column_sum_grid(hw: Hardware, rows: int, cols: int) -> int:
    """PyTorch's reduce_kernel grid for a sum over rows (H200 traces): 128 columns per block;
    past 1024 rows the rows split over enough blocks for ~16 per SM, at least 64 rows each."""
    col_blocks = max(1, math.ceil(cols / REDUCTION_THREADS))
    if rows <= 1024:
        return col_blocks
    splits = max(1, min(math.ceil(16 * hw.sm_count / col_blocks), rows // 64))
    return col_blocks * splits


def row_layout(launch: LaunchConfig, op: Op) -> tuple[int, int, int]:
    """(threads per block, threads per row, rows per block) of a row-wise reduction.

    The launch's `threads_per_row` / `rows_per_block` win over the op's `threads_per_row`
    attribute; a block without them covers one row; without a block, it is their product.
    """
    per_row = launch.threads_per_row or (int(op.attrs["threads_per_row"]) if "threads_per_row" in op.attrs else None)
    rows = launch.rows_per_block
    threads = launch.block or (per_row * rows if per_row and rows else REDUCTION_THREADS)
    if per_row is None:
        per_row = max(1, threads // rows) if rows else threads
    rows = rows or max(1, threads // per_row)
    return threads, per_row, rows


@register("reduction")
def reduction_cost(op: Op, graph: Graph, hw: Hardware) -> KernelCost:
    rows, cols = int(op.attrs["rows"]), int(op.attrs["cols"])
    if min(rows, cols) <= 0:
        raise KernelsimError(f"op '{op.name}': reduction dimensions must be positive (rows={rows}, cols={cols})")
    passes = max(1, int(op.attrs.get("passes", 1)))
    numel = rows * cols
    r, w = io_bytes(op, graph)
    math_ops = op.attrs.get("math", {})
    if op.attrs.get("axis", "cols") == "rows":
        launch = op.launch or LaunchConfig(block=REDUCTION_THREADS)
        op = op.with_(launch=launch)
        return streaming_cost(op, graph, hw, numel=numel, bytes_read=r * passes, bytes_written=w,
                              inflight_per_elem=read_bytes_per_elem(op, graph, numel), math_ops=math_ops,
                              inflight_cap=VECTOR_BYTES, default_grid=column_sum_grid(hw, rows, cols))
    launch = op.launch or LaunchConfig(block=REDUCTION_THREADS)
    threads, per_row, rows_per_block = row_layout(launch, op)
    grid = launch.grid or math.ceil(rows / rows_per_block)
    # A grid smaller than the rows need (a persistent kernel, e.g. Inductor's) loops: each block
    # covers `row_iters` groups of rows, one after the other.
    row_iters = max(1, math.ceil(rows / (grid * rows_per_block)))
    regs = launch.regs_per_thread or estimate_registers(hw, 8)
    occ = occupancy(hw, threads, regs, launch.smem_per_block or 0, grid)
    sync_s = hw.reduction_step_s * math.log2(max(per_row, 2))
    row_read, row_write = r / rows, w / rows
    per_wave = hw.sm_count * occ.blocks_per_sm
    full_waves, rem = divmod(grid, per_wave)
    mem_s = 0.0
    limiter = "hbm"
    for blocks, count in ((per_wave, full_waves), (rem, 1 if rem else 0)):
        if not count:
            continue
        sms = min(hw.sm_count, blocks)
        bw, lim = bandwidth(hw, sms, blocks / sms * threads * VECTOR_BYTES)
        wave = 0.0
        for p in range(passes):
            nbytes = blocks * rows_per_block * row_iters * (row_read + (row_write if p == passes - 1 else 0.0))
            chain = (hw.mem_latency_s + sync_s) * row_iters
            stream = nbytes / bw
            wave += max(chain, stream)
            if chain > stream:
                lim = "latency"
        mem_s += count * wave
        limiter = lim
    comp_s, comp_lim, fp32, _ = compute_time(hw, op, numel, math_ops, occ)
    body = max(mem_s, comp_s)
    time = hw.kernel_fixed_s + body
    if comp_s > mem_s:
        limiter = comp_lim
    if body < hw.kernel_fixed_s:
        limiter = "launch"
    total = r * passes + w
    return KernelCost(
        time_s=time, compute_s=comp_s, memory_s=mem_s, fixed_s=hw.kernel_fixed_s, limiter=limiter,
        category="compute" if comp_s > mem_s else "memory", hbm_bytes=total, flops=numel * 2 * fp32,
        bw_demand=min(1.0, total / time / hw.hbm_sustained_bps), sm_demand=min(1.0, grid / per_wave),
        detail=MappingProxyType({"grid": grid, "block": threads, "threads_per_row": per_row, "rows_per_block": rows_per_block, "row_iters": row_iters,
                                 "passes": passes,
                                 "blocks_per_sm": occ.blocks_per_sm, "waves": occ.waves,
                                 "sync_us": round(sync_s * 1e6, 4)}),
    )
