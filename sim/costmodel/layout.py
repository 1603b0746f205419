"""Copies and layout transforms: streaming kernels with their own bandwidth factors.

A transpose reads and writes every byte but cannot coalesce both sides as well as a copy:
its bandwidth is the profile's `layout_bandwidth_factor` of a copy's. Copies on the copy
engine run over PCIe (H2D/D2H) and take no SMs. A driver memcpy (no launch config) whose operands
sit in HBM (`l2: cold`) has the profile's `memcpy_clean_fixed_us`; behind an L2 full of dirty lines
(`l2_dirty` too) the dirty lines its reads and writes evict are written back (memory.l2_dirty_writeback_gbps).
"""

from __future__ import annotations

from dataclasses import replace

from sim.costmodel import KernelCost
from sim.costmodel.elementwise import io_bytes, numel_of, read_bytes_per_elem, streaming_cost
from sim.costmodel.memory import dirty_writeback_time
from sim.graph import Graph, Op
from sim.hardware import Hardware

# NB: a copy with no launch config is the driver's memcpy kernel (cudaMemcpyAsync D2D), with the
# launch of the profile's `library.memcpy`.


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
    driver_memcpy = op.launch is None
    if driver_memcpy:
        op = op.with_(launch=hw.library.memcpy_launch)
    cost = streaming_cost(
        op, graph, hw, numel=numel, bytes_read=nbytes / 2, bytes_written=nbytes / 2,
        inflight_per_elem=2.0, math_ops={},
    )
    if driver_memcpy and op.attrs.get("l2") == "cold" and hw.memcpy_clean_fixed_s is not None:
        # NB: the default price carries the calibration's convention (copies measured after an L2
        # flush that writes, so every line the copy allocates first evicts a dirty one); with its
        # operands in HBM the driver's memcpy has its own, measured fixed cost (a clean L2's). The
        # streaming term is unchanged; an L2 full of dirty lines (`l2_dirty`) adds the write-back of the
        # lines its reads and writes allocate (the GEMMs' term: min(HBM bytes, L2) at the fitted rate).
        writeback = dirty_writeback_time(hw, op.attrs, nbytes)
        cost = replace(cost, time_s=cost.time_s - cost.fixed_s + hw.memcpy_clean_fixed_s + writeback,
                       memory_s=cost.memory_s + writeback, fixed_s=hw.memcpy_clean_fixed_s)
    return cost


TRANSPOSING = frozenset({"transpose", "nchw_to_nhwc", "nhwc_to_nchw"})


def layout_cost(op: Op, graph: Graph, hw: Hardware) -> KernelCost:
    numel = numel_of(op, graph)
    r, w = io_bytes(op, graph)
    # Transposes move data across the tile: reads or writes go strided. A contiguous copy or a
    # cast streams both sides like a copy.
    factor = hw.layout_bw_factor if op.attrs.get("transform") in TRANSPOSING else 1.0
    return streaming_cost(
        op, graph, hw, numel=numel, bytes_read=r, bytes_written=w,
        inflight_per_elem=read_bytes_per_elem(op, graph, numel), math_ops={},
        category="layout", bandwidth_factor=factor,
    )
