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

PyTorch's own sums (`impl: torch_reduce`, where the profile has a `reduce_kernel` section) follow
ATen's launch heuristics (setReduceConfig in Reduce.cuh, as data in the profile): block shape, how
many inputs each thread sums (values per thread) and whether the input is split across blocks (a
global reduction). Each thread's loop issues one vector load (the vectorized row path) or four
independent loads (the column path) per iteration and waits for them before the next: with few
outputs the kernel is a chain of `iterations` memory round trips, at the latency of where the input
sits — L2 (warm) or HBM (cold, op attribute `l2: cold`) — not a stream; around the loop, a fixed entry
and exit per path and, for a split input, the hand-off to the last block (profile reduce_kernel).

PyTorch's softmax (`impl: torch_softmax`), layer norm and RMS norm (`impl: torch_layer_norm`, `torch_rms_norm`)
forwards are priced as the kernels ATen runs for them (profile softmax_kernel, layer_norm_kernel): see
_torch_softmax_cost and _torch_layer_norm_cost; their backwards (`impl: torch_softmax_bwd`, torch_layer_norm_bwd,
...) likewise: _torch_softmax_bwd_cost, _torch_layer_norm_bwd_cost.
"""

from __future__ import annotations

import math
from types import MappingProxyType
from typing import Any

from sim.costmodel import KernelCost
from sim.costmodel.elementwise import (
    compute_time,
    estimate_registers,
    io_bytes,
    read_bytes_per_elem,
    streaming_cost,
)
from sim.costmodel.memory import bandwidth, dirty_writeback_time, smooth_min
from sim.errors import KernelsimError
from sim.graph import Graph, LaunchConfig, Op
from sim.hardware import Hardware, occupancy

# NB: PyTorch's defaults are the profile's `library.reduction` (H200 traces, torch 2.11: layer norm
# and most row reductions run 128 threads per row; column sums blocks of 32 × 4 threads covering
# 128 columns).


def column_sum_grid(hw: Hardware, rows: int, cols: int) -> int:
    """PyTorch's reduce_kernel grid for a sum over rows (H200 traces): a block's threads cover as many
    columns; past `column_split_rows` rows the rows split over enough blocks for about
    `column_split_blocks_per_sm` per SM, at least `column_split_min_rows` rows each (library.reduction)."""
    lib = hw.library
    col_blocks = max(1, math.ceil(cols / lib.reduction_threads))
    if rows <= lib.column_split_rows:
        return col_blocks
    splits = max(1, min(math.ceil(lib.column_split_blocks_per_sm * hw.sm_count / col_blocks),
                        rows // lib.column_split_min_rows))
    return col_blocks * splits


def _last_pow2(n: int) -> int:
    return 1 << (max(1, n).bit_length() - 1)


def torch_reduce_config(hw: Hardware, num_outputs: int, inputs_per_output: int, fastest: bool,
                        elem_bytes: int) -> dict[str, int | str]:
    """ATen's setReduceConfig (Reduce.cuh, torch 2.11) for a 2-D contiguous input: `fastest` when the
    reduced dimension is the contiguous one (a row sum). Constants from the profile's reduce_kernel."""
    rk = hw.reduce_kernel
    max_threads, input_vec, vt0 = int(rk["max_threads"]), int(rk["input_vec"]), int(rk["vt0"])
    min_vpt, max_vpt = int(rk["min_values_per_thread"]), int(rk["max_values_per_thread"])
    output_vec = 1
    dim0, dim1 = (inputs_per_output, num_outputs) if fastest else (num_outputs, inputs_per_output)
    vectorized = False
    if fastest and dim0 > 128 and vt0 >= input_vec:
        vectorized = True
        dim0 //= input_vec
    elif not fastest:
        output_vec = 4
        while num_outputs % output_vec:
            output_vec //= 2
        dim0 //= output_vec
    mnt = max_threads // output_vec
    d0 = _last_pow2(dim0) if dim0 < mnt else mnt
    d1 = _last_pow2(dim1) if dim1 < mnt else mnt
    bw = min(d0, hw.warp_size)
    bh = min(d1, mnt // bw)
    bw = min(d0, mnt // bh)
    step_in, step_out = 1, 1
    if fastest:
        step_in *= bw
    else:
        step_out *= bw
    split_warps = math.ceil(inputs_per_output / step_in) >= min(bh * int(rk["warp_split_values"]), max_vpt)
    if split_warps:
        step_in *= bh
    else:
        step_out *= bh
    threads = bw * bh
    target = hw.sm_count * (hw.max_threads_per_sm // threads)
    grid_x = math.ceil(math.ceil(num_outputs / output_vec) / step_out)
    vpt = math.ceil(inputs_per_output / step_in)
    ctas = 1
    if split_warps and vpt >= max_vpt and grid_x <= target:
        ctas = max(min(math.ceil(target / grid_x), math.ceil(vpt / min_vpt)), math.ceil(vpt / max_vpt))
        step_in *= ctas
        vpt = math.ceil(inputs_per_output / step_in)
    path = "vec" if vectorized else "ilp"
    per_iter = input_vec if vectorized else vt0
    return {"block_x": bw, "block_y": bh, "threads": threads, "grid_x": grid_x, "ctas_per_output": ctas,
            "values_per_thread": vpt, "iterations": math.ceil(vpt / per_iter), "path": path,
            "output_vec": output_vec, "threads_per_output": (bw if fastest else 1) * (bh if split_warps else 1),
            "load_bytes": (input_vec if vectorized else vt0 * output_vec) * elem_bytes}


def _torch_reduce_cost(op: Op, graph: Graph, hw: Hardware, rows: int, cols: int) -> KernelCost:
    """A PyTorch sum over rows (axis rows: column sums) or over columns (a row sum)."""
    r, w = io_bytes(op, graph)
    fastest = op.attrs.get("axis", "cols") != "rows"
    num_outputs, inputs = (rows, cols) if fastest else (cols, rows)
    elem = max(1, round(r / (rows * cols)))
    cfg = torch_reduce_config(hw, num_outputs, inputs, fastest, elem)
    state = str(op.attrs.get("l2", "warm"))
    rk = hw.reduce_kernel
    t_iter = rk.get(f"iter_ns_{cfg['path']}_{state}", rk[f"iter_ns_{cfg['path']}_warm"]) * 1e-9
    threads = int(cfg["threads"])
    grid = int(cfg["grid_x"]) * int(cfg["ctas_per_output"])
    launch = op.launch or LaunchConfig(block=threads)
    occ = occupancy(hw, threads, launch.regs_per_thread or estimate_registers(hw, 8), launch.smem_per_block or 0, grid)
    sync_s = hw.reduction_step_s * math.log2(max(int(cfg["threads_per_output"]), 2))
    chain = int(cfg["iterations"]) * t_iter + sync_s
    # a split input: the last block of each output sums the partials (in L2), block_y of them at a time
    ctas = int(cfg["ctas_per_output"])
    glob = math.ceil(ctas / int(cfg["block_y"])) * rk["iter_ns_ilp_warm"] * 1e-9 if ctas > 1 else 0.0
    per_wave = hw.sm_count * occ.blocks_per_sm
    # Little's law with the loop's own rate: every resident thread has `load_bytes` in flight per
    # iteration, one iteration per t_iter; the HBM ceiling blends in (the knee: profile
    # reduce_kernel.knee_exponent_STATE, else the copies' bandwidth_knee_exponent), and the SMs in use cap
    # it. Wave by wave: the full waves of resident blocks, then the tail wave's blocks alone, at their own
    # rate (640 blocks at 528 a wave: 112 blocks stream the last eighth of the input at a fifth of the
    # rate). Few blocks: the time is the chain, iterations x t_iter; many: the stream.
    knee = rk.get(f"knee_exponent_{state}", hw.bw_knee_exponent)
    block_bytes = (r + w) / grid

    def wave_s(blocks: int) -> float:
        little_w = blocks * threads * int(cfg["load_bytes"]) / t_iter
        bw_w = min(smooth_min(little_w, hw.hbm_sustained_bps, knee), min(hw.sm_count, blocks) * hw.per_sm_max_bps)
        if not 0.0 < bw_w < math.inf:  # as memory.bandwidth: an error naming the profile, not a division by zero
            raise KernelsimError(f"hardware profile '{hw.name}': a PyTorch sum's streaming bandwidth comes out "
                                 f"{bw_w:g} B/s (reduce_kernel.knee_exponent_{state} or iter_ns_{cfg['path']}_{state} "
                                 "out of range)")
        # never faster than one thread's own chain of dependent iterations (a partly idle block, e.g. 12
        # rows over 16 threads, moves fewer bytes per iteration than its threads could)
        return max(blocks * block_bytes / bw_w, int(cfg["iterations"]) * t_iter)

    full, tail = divmod(grid, per_wave)
    waves = full + (1 if tail else 0)
    stream = full * wave_s(per_wave) + (wave_s(tail) if tail else 0.0)
    little = min(grid, per_wave) * threads * int(cfg["load_bytes"]) / t_iter
    # Before the first load and after the last: the loop's entry and exit (address set-up, the first touch
    # of the input's pages, the block's own combine and store; per path: their block shapes differ) and,
    # for a split input, the hand-off to the last block (partial written, fenced, a semaphore taken) --
    # each a few round trips at where the data sits, not a stream (profile reduce_kernel.entry_ns_PATH_STATE,
    # split_ns_STATE).
    path = str(cfg["path"])
    entry = rk.get(f"entry_ns_{path}_{state}", rk.get(f"entry_ns_{path}_warm", 0.0)) * 1e-9
    split = rk.get(f"split_ns_{state}", rk.get("split_ns_warm", 0.0)) * 1e-9 if ctas > 1 else 0.0
    mem_s = stream + sync_s + glob + entry + split
    # an L2 full of dirty lines (a written flush before the call; op attribute `l2_dirty`): the lines the
    # input evicts are written back first, up to the L2's capacity -- the GEMMs' term
    # (sim.costmodel.memory.dirty_writeback_time), priced only where the profile has the rate
    writeback = dirty_writeback_time(hw, op.attrs, r) if state == "cold" else 0.0
    mem_s += writeback
    limiter = "latency" if little < hw.hbm_sustained_bps else "hbm"
    time = hw.kernel_fixed_s + mem_s
    return KernelCost(
        time_s=time, compute_s=0.0, memory_s=mem_s, fixed_s=hw.kernel_fixed_s, limiter=limiter,
        category="memory", hbm_bytes=r + w, flops=float(rows * cols),
        bw_demand=min(1.0, (r + w) / time / hw.hbm_sustained_bps), sm_demand=min(1.0, grid / per_wave),
        detail=MappingProxyType({"grid": grid, "block": threads, "l2": state, **cfg,
                                 "iter_ns": round(t_iter * 1e9, 2), "waves": waves,
                                 "chain_us": round(waves * chain * 1e6, 4), "stream_us": round(stream * 1e6, 4),
                                 "global_us": round(glob * 1e6, 4),
                                 "entry_us": round(entry * 1e6, 4), "split_us": round(split * 1e6, 4),
                                 **({"writeback_us": round(writeback * 1e6, 4)} if writeback else {})}),
    )


def _persistent_warp_layout(cols: int, warp_size: int) -> tuple[int, int, int]:
    """ATen's persistent softmax kernels (dispatch_softmax_forward / _backward, PersistentSoftmax.cuh): the row
    padded to a power of two, a warp (or fewer lanes) per row, two rows a warp up to 128 elements, 128 threads a
    block. (padded row, lanes a row, rows a warp)."""
    pow2 = 1 << max(0, (cols - 1).bit_length())
    return pow2, min(pow2, warp_size), 2 if pow2 <= 128 else 1


def torch_softmax_config(hw: Hardware, cols: int, elem_bytes: int) -> dict[str, int | str]:
    """Which of ATen's softmax forward kernels runs over rows of `cols` elements (host_softmax in SoftMax.cu,
    torch 2.11; constants from the profile's softmax_kernel) and how it lays a row out: `kernel` (warp, reg,
    smem or gmem), `threads` per block, `threads_per_row`, `rows_per_block`, and `loads`: the elements each
    thread loads for its row."""
    sk = hw.softmax_kernel
    warp_size = hw.warp_size
    if cols <= sk["warp_max_elements"] and cols * elem_bytes <= sk["warp_max_bytes"]:
        pow2, lanes, rows_per_warp = _persistent_warp_layout(cols, warp_size)
        return {"kernel": "warp", "threads": 128, "threads_per_row": lanes,
                "rows_per_block": (128 // lanes) * rows_per_warp, "loads": math.ceil(cols / lanes),
                "iterations": pow2 // lanes}
    threads = math.ceil(min(cols, int(sk["max_threads"])) / warp_size) * warp_size
    loads = math.ceil(cols / threads)
    if loads <= sk["reg_max_loads"]:
        kernel = "reg"
    else:
        vec = max(1, 16 // elem_bytes)  # ILP = sizeof(float4) / sizeof(scalar_t)
        fits = cols * elem_bytes + threads // warp_size * 4 < sk["smem_per_block_bytes"]
        kernel = "smem" if fits and cols % vec == 0 else "gmem"
    return {"kernel": kernel, "threads": threads, "threads_per_row": threads, "rows_per_block": 1, "loads": loads}


# The profile key of each ATen softmax kernel's step time (softmax_kernel.KEY): one block's turn on an SM per
# element each of its threads holds. The three-sweep fallback has none (it is priced as three sweeps).
SOFTMAX_STEP_KEYS = {"reg": "load_ns", "smem": "smem_step_ns"}


def softmax_sm_steps(hw: Hardware, cfg: dict[str, int | str], rows: int) -> int:
    """Steps of the busiest SM: its blocks (the grid over the SMs) x the elements each thread holds."""
    blocks = math.ceil(rows / int(cfg["rows_per_block"]))
    return math.ceil(blocks / hw.sm_count) * int(cfg["loads"])


def _torch_softmax_cost(op: Op, graph: Graph, hw: Hardware, rows: int, cols: int) -> KernelCost:
    """PyTorch's softmax forward over the last dimension (`impl: torch_softmax`): the kernel ATen picks for
    the row length (torch_softmax_config), bound by its SMs. An SM takes its blocks' turns one at a time --
    in a turn, every thread of the block loads, reduces and writes one of its elements -- whether one block is
    resident or several, so the kernel takes the busiest SM's blocks x elements-per-thread steps at the
    kernel's step time (profile softmax_kernel: load_ns for the register kernel, which loads one scalar at a
    time; smem_step_ns). Measured on H200 (bf16): 3.4 us a wave at 2 blocks x 4 loads and 4.1 us at 1 block
    x 8, from 256 rows to 65536, i.e. about 2200 elements per SM per us for the register kernel, about 4000 for
    the shared-memory kernel. The warp kernel's lanes wait for each load before the next: each wave of
    resident blocks takes elements-per-lane x warp_chain_ns. The time is never less than what the row-wise
    reduction model gives for ATen's launch of that kernel (one sweep over the row; the three-sweep fallback,
    cunn_SoftMaxForward, is priced that way only) nor than its bytes at the HBM rate."""
    import dataclasses

    r, w = io_bytes(op, graph)
    elem = max(1, round(r / (rows * cols)))
    cfg = torch_softmax_config(hw, cols, elem)
    launch = op.launch or LaunchConfig()
    threads = int(cfg["threads"])
    kernel = str(cfg["kernel"])
    if kernel == "warp" and "warp_slot_ns" in hw.softmax_kernel:
        return _torch_softmax_warp_cost(op, hw, rows, cols, elem, cfg, r + w)
    key = SOFTMAX_STEP_KEYS.get(kernel)
    steps = softmax_sm_steps(hw, cfg, rows)
    sm_s = steps * hw.softmax_kernel[key] * 1e-9 if key in hw.softmax_kernel else 0.0
    if kernel == "warp" and "warp_chain_ns" in hw.softmax_kernel:
        # a block's lanes load their elements one after another (softmax_warp_forward's guarded loads), each
        # waited for: a chain per wave of resident blocks (the blocks of a wave overlap, the waves do not)
        # registers: the launch's (a profiled or imported kernel), else the kernel's own rule (profile
        # warp_base_regs + the padded row's elements a lane holds, WARP_ITERATIONS)
        base = hw.softmax_kernel.get("warp_base_regs")
        regs = launch.regs_per_thread or (int(base) + int(cfg["iterations"]) if base is not None
                                          else estimate_registers(hw, int(cfg["loads"])))
        blocks = math.ceil(rows / int(cfg["rows_per_block"]))
        occ = occupancy(hw, threads, regs, 0, blocks)
        waves = math.ceil(blocks / (hw.sm_count * occ.blocks_per_sm))
        sm_s = max(sm_s, waves * int(cfg["loads"]) * hw.softmax_kernel["warp_chain_ns"] * 1e-9)
    if kernel != "reg":
        attrs = {k: v for k, v in op.attrs.items() if k not in ("impl", "passes", "threads_per_row")}
        attrs["passes"] = 3 if kernel == "gmem" else 1
        row_launch = dataclasses.replace(launch, block=threads, grid=None, threads_per_row=int(cfg["threads_per_row"]),
                                         rows_per_block=int(cfg["rows_per_block"]))
        cost = reduction_cost(op.with_(attrs=attrs, launch=row_launch), graph, hw)
        body = cost.time_s - cost.fixed_s
        extra = {"softmax_kernel": kernel, "steps_per_sm": steps, "sm_us": round(sm_s * 1e6, 4)}
        if sm_s <= body:
            return dataclasses.replace(cost, detail=MappingProxyType({**cost.detail, **extra}))
        time = cost.fixed_s + sm_s
        return dataclasses.replace(cost, time_s=time, memory_s=sm_s, limiter="issue", category="memory",
                                   bw_demand=min(1.0, cost.hbm_bytes / time / hw.hbm_sustained_bps),
                                   detail=MappingProxyType({**cost.detail, **extra}))
    loads = int(cfg["loads"])
    regs = launch.regs_per_thread or estimate_registers(hw, loads)
    occ = occupancy(hw, threads, regs, threads // hw.warp_size * 4, rows)
    per_wave = hw.sm_count * occ.blocks_per_sm
    waves = math.ceil(rows / per_wave)
    stream = (r + w) / hw.hbm_sustained_bps
    mem_s = max(sm_s, stream)
    time = hw.kernel_fixed_s + mem_s
    return KernelCost(
        time_s=time, compute_s=0.0, memory_s=mem_s, fixed_s=hw.kernel_fixed_s,
        limiter="issue" if sm_s >= stream else "hbm", category="memory", hbm_bytes=r + w,
        flops=float(rows * cols), bw_demand=min(1.0, (r + w) / time / hw.hbm_sustained_bps),
        sm_demand=min(1.0, rows / per_wave),
        detail=MappingProxyType({"softmax_kernel": kernel, "grid": rows, "block": threads, "loads": loads,
                                 "blocks_per_sm": occ.blocks_per_sm, "waves": waves, "steps_per_sm": steps,
                                 "sm_us": round(sm_s * 1e6, 4), "stream_us": round(stream * 1e6, 4)}),
    )


def _torch_softmax_warp_cost(op: Op, hw: Hardware, rows: int, cols: int, elem: int, cfg: dict[str, int | str],
                             io: float) -> KernelCost:
    """PyTorch's softmax forward on ATen's persistent warp kernel (softmax_warp_forward, rows of up to
    warp_max_elements and warp_max_bytes; torch_softmax_config gives its layout): each lane holds the row's
    elements `iterations` slots deep (the row padded to a power of two; two rows a lane up to 128 elements) and
    loads the `loads` of them that lie in the row. A wave of resident blocks on an SM takes the lane's loads x the
    wait for each (warp_chain_ns with the input in HBM: `l2: cold` or an input past warm_l2_share of the L2;
    warp_chain_ns_warm from L2; x warp_chain_fp32_ratio for elements of 4 bytes or more) plus the wave's threads x
    their element slots x warp_slot_ns (the SM works through every slot, padded ones too: the max, exp and sum over
    -inf). Measured on H200 (l2_cold softmax_cal: 160 to 49152 rows of 128 to 2048 elements): a single wave's time
    grows with the loads alone (about 0.14 us a load from HBM, 0.1 from L2, bf16; fp32 about three quarters of
    that), many rows run at about 0.12 ns a slot per SM, for bf16 and fp32 alike. Never less than the bytes at
    the HBM rate."""
    sk = hw.softmax_kernel
    launch = op.launch or LaunchConfig()
    threads = int(cfg["threads"])
    batch = max(1, int(cfg["rows_per_block"]) * int(cfg["threads_per_row"]) // threads)  # rows a lane holds
    loads, slots = int(cfg["loads"]) * batch, int(cfg["iterations"]) * batch
    base = sk.get("warp_base_regs")
    regs = launch.regs_per_thread or (int(base) + slots if base is not None else estimate_registers(hw, loads))
    blocks = math.ceil(rows / int(cfg["rows_per_block"]))
    occ = occupancy(hw, threads, regs, 0, blocks)
    per_sm = math.ceil(blocks / hw.sm_count)
    warm = op.attrs.get("l2") != "cold" and rows * cols * elem <= hw.l2_bytes * sk["warm_l2_share"]
    chain = sk["warp_chain_ns_warm" if warm else "warp_chain_ns"] * 1e-9
    if elem >= 4:
        chain *= sk["warp_chain_fp32_ratio"]
    slot = sk["warp_slot_ns"] * 1e-9
    body, waves = _waves_s(per_sm, occ.blocks_per_sm, 1, lambda n: loads * chain + n * threads * slots * slot)
    stream = io / hw.hbm_sustained_bps
    mem_s = max(body, stream)
    time = hw.kernel_fixed_s + mem_s
    chain_s = waves * loads * chain
    return KernelCost(
        time_s=time, compute_s=0.0, memory_s=mem_s, fixed_s=hw.kernel_fixed_s,
        limiter="hbm" if stream >= body else ("latency" if chain_s >= 0.5 * body else "issue"), category="memory",
        hbm_bytes=io, flops=float(rows * cols), bw_demand=min(1.0, io / time / hw.hbm_sustained_bps),
        sm_demand=min(1.0, blocks / (hw.sm_count * occ.blocks_per_sm)),
        detail=MappingProxyType({"softmax_kernel": "warp", "grid": blocks, "block": threads, "loads": loads,
                                 "slots": slots, "input_in_l2": warm, "blocks_per_sm": occ.blocks_per_sm,
                                 "waves": waves, "chain_us": round(chain_s * 1e6, 4),
                                 "stream_us": round(stream * 1e6, 4)}),
    )


def torch_softmax_bwd_config(hw: Hardware, cols: int, elem_bytes: int) -> dict[str, int | str]:
    """Which of ATen's softmax backward kernels runs over rows of `cols` elements (host_softmax_backward in SoftMax.cu,
    torch 2.11; constants from the profile's softmax_kernel) and its layout: `kernel` (warp: the persistent
    softmax_warp_backward while a row has at most bwd_warp_max_elements and bwd_warp_max_bytes; smem:
    cunn_SoftMaxBackwardSmem, a block per row that keeps the row in shared memory while it fits; gmem:
    cunn_SoftMaxBackward, the same block reading the row twice from global memory), `threads` per block,
    `rows_per_block`, `loads` (the row's elements a lane of the warp kernel loads) and `slots` (the padded row's
    elements a lane holds), `iterations` (a block thread's vector loads of its row)."""
    sk = hw.softmax_kernel
    warp_size = hw.warp_size
    if cols <= sk["bwd_warp_max_elements"] and cols * elem_bytes <= sk["bwd_warp_max_bytes"]:
        pow2, lanes, batch = _persistent_warp_layout(cols, warp_size)  # dispatch_softmax_backward: the forward's
        return {"kernel": "warp", "threads": 128, "rows_per_block": (128 // lanes) * batch,
                "loads": math.ceil(cols / lanes) * batch, "slots": (pow2 // lanes) * batch}
    # SoftMax_getBlockSize(ILP, dim): half of min(dim / ILP, max_threads) rounded up to a power of two, at least a
    # warp (ILP = sizeof(float4) / sizeof(scalar_t)); the shared-memory kernel while the row (plus 4 bytes a warp)
    # fits a block's shared memory and is whole vectors
    vec = max(1, 16 // elem_bytes)
    cap = max(1, min(cols // vec, int(sk["max_threads"])) // 2)
    threads = max(warp_size, 1 << max(0, (cap - 1).bit_length()))
    fits = cols * elem_bytes + threads // warp_size * 4 < sk["smem_per_block_bytes"] and cols % vec == 0
    return {"kernel": "smem" if fits else "gmem", "threads": threads, "rows_per_block": 1,
            "iterations": math.ceil(cols / (vec * threads))}


def _torch_softmax_bwd_cost(op: Op, graph: Graph, hw: Hardware, rows: int, cols: int) -> KernelCost:
    """PyTorch's softmax backward kernel over the last dimension (`impl: torch_softmax_bwd`: what
    aten._softmax_backward_data runs after its elementwise grad * output, which is an op of its own; the op reads
    that product and the output, writes the input gradient). ATen's kernel for the row (torch_softmax_bwd_config):
    - the warp kernel: a wave of n resident blocks on an SM takes a lane's loads x bwd_warp_chain_ns (the wait for
      each; bwd_warp_chain_ns_hbm where the inputs are in HBM; x bwd_warp_fp32_ratio for 4-byte elements) plus
      n x 128 threads x loads x bwd_warp_elem_ns (the SM's work per element; padded slots are skipped);
    - the block kernels (a block per row): a wave takes bwd_block_ns plus its bytes over the active SMs at
      bwd_stream_gbps, its inputs in L2; from HBM, bwd_block_ns_hbm (the part of the round trip the stream does
      not hide) plus its bytes at the HBM rate. The two-sweep kernel (rows too long for shared memory) moves
      bwd_gmem_streams rows of bytes per row of elements (three would be each input read once and the gradient
      written).
    The inputs are where the product kernel left them: in L2 while both fit warm_l2_share of it (whatever the op's
    `l2` says: ATen's product kernel has just read the output and written the product), else in HBM, and then the
    warp kernel's time is never less than its bytes at the HBM rate. Measured on H200 (l2_cold softmax_bwd_cal: 160
    to 49152 rows of 128 to 32768 elements, bf16 and fp32, clean and warm)."""
    sk = hw.softmax_kernel
    r, w = io_bytes(op, graph)
    elem = _row_elem_bytes(op, graph, rows, cols)
    cfg = torch_softmax_bwd_config(hw, cols, elem)
    kernel, threads = str(cfg["kernel"]), int(cfg["threads"])
    launch = op.launch or LaunchConfig()
    blocks = math.ceil(rows / int(cfg["rows_per_block"]))
    in_l2 = 2 * rows * cols * elem <= hw.l2_bytes * sk["warm_l2_share"]
    per_sm = math.ceil(blocks / hw.sm_count)
    io = r + w
    if kernel == "warp":
        loads, slots = int(cfg["loads"]), int(cfg["slots"])
        regs = launch.regs_per_thread or min(255, round(sk["bwd_warp_base_regs"] + sk["bwd_warp_regs_per_slot"] * slots))
        occ = occupancy(hw, threads, regs, 0, blocks)
        chain = sk["bwd_warp_chain_ns" if in_l2 else "bwd_warp_chain_ns_hbm"] * 1e-9
        if elem >= 4:
            chain *= sk["bwd_warp_fp32_ratio"]
        e = sk["bwd_warp_elem_ns"] * 1e-9
        body, waves = _waves_s(per_sm, occ.blocks_per_sm, 1, lambda n: loads * chain + n * threads * loads * e)
        moved = io
        extra: dict[str, Any] = {"loads": loads, "slots": slots, "chain_us": round(waves * loads * chain * 1e6, 4)}
    else:
        smem = cols * elem + threads // hw.warp_size * 4 if kernel == "smem" else threads // hw.warp_size * 4
        occ = occupancy(hw, threads, launch.regs_per_thread or estimate_registers(hw, int(cfg["iterations"])),
                        launch.smem_per_block or smem, blocks)
        streams = 3.0 if kernel == "smem" else float(sk["bwd_gmem_streams"])
        row_bytes = streams * cols * elem
        active = min(hw.sm_count, blocks)
        # from L2 a wave's bytes come at the SMs' rate; from HBM at the HBM rate, with the part of the round trip
        # the stream does not hide
        latency = sk["bwd_block_ns" if in_l2 else "bwd_block_ns_hbm"] * 1e-9
        rate = sk["bwd_stream_gbps"] * 1e9 if in_l2 else hw.hbm_sustained_bps
        body, waves = _waves_s(per_sm, occ.blocks_per_sm, 1, lambda n: latency + n * active * row_bytes / rate)
        moved = r * (streams - 1) / 2 + w
        extra = {"iterations": int(cfg["iterations"]), "streams": streams}
    stream = 0.0 if in_l2 or kernel != "warp" else moved / hw.hbm_sustained_bps
    mem_s = max(body, stream)
    time = hw.kernel_fixed_s + mem_s
    return KernelCost(
        time_s=time, compute_s=0.0, memory_s=mem_s, fixed_s=hw.kernel_fixed_s,
        # from HBM the block kernels stream at its rate; the warp kernel where its floor binds
        limiter="hbm" if (kernel != "warp" and not in_l2) or (stream > 0 and stream >= body) else "latency",
        category="memory", hbm_bytes=moved,
        flops=float(2 * rows * cols), bw_demand=min(1.0, moved / time / hw.hbm_sustained_bps),
        sm_demand=min(1.0, blocks / (hw.sm_count * occ.blocks_per_sm)),
        detail=MappingProxyType({"softmax_kernel": f"{kernel}_bwd", "grid": blocks, "block": threads,
                                 "inputs_in_l2": in_l2, "blocks_per_sm": occ.blocks_per_sm, "waves": waves,
                                 **extra, "stream_us": round(stream * 1e6, 4)}),
    )


def torch_layer_norm_config(hw: Hardware, cols: int) -> dict[str, int] | None:
    """ATen's vectorized layer-norm forward over rows of `cols` elements (launch_vectorized_layer_norm_kernel in
    layer_norm_kernel.cu, torch 2.11; RMS norm runs the same kernel): one block of `threads` per row, each thread
    loading vec_elems elements at a time, `iterations` times per pass (profile layer_norm_kernel). None where a row
    is not whole vectors: ATen then runs its two-kernel fallback (row moments, then normalize:
    _torch_layer_norm_fallback_cost where the profile has its fb_* keys, else the row-wise reduction the op
    describes)."""
    lk = hw.layer_norm_kernel
    vec, threads = int(lk["vec_elems"]), int(lk["threads"])
    if cols % vec:
        return None
    return {"threads": threads, "iterations": math.ceil(cols / (threads * vec))}


# The layer_norm_kernel keys of each impl's times: layer norm's (iter_ns, iter_ns_warm, block_ns) and RMS norm's
# (the same kernel with its rms flag: rms_iter_ns, ...); stream_gbps and the launch are shared
LAYER_NORM_PREFIX = {"torch_layer_norm": "", "torch_rms_norm": "rms_"}


def _torch_layer_norm_cost(op: Op, graph: Graph, hw: Hardware, rows: int, cols: int,
                           cfg: dict[str, int]) -> KernelCost:
    """PyTorch's layer norm / RMS norm forward (`impl: torch_layer_norm` / `torch_rms_norm`: RMS norm's times are
    the rms_ keys): ATen's vectorized kernel, a block per row, blocks_per_sm resident. Each thread's two loops
    (statistics, then normalize) wait for one vector load per iteration, so every iteration of a wave of resident
    blocks takes the longer of the round trip (iter_ns with the input in HBM: op attribute `l2: cold`, or an input
    past the L2 share below; iter_ns_warm from L2) and the wave's bytes of that iteration at stream_gbps: its row slice read, its output slice written and, where the
    rows resident at once pass reread_l2_share of the L2, the slice read again from HBM (else from L2). The busiest
    SM runs its blocks wave after wave and spends block_ns of its own on each (the block's Welford reduction:
    shuffles, shared memory, barriers). Measured on H200 (bf16, calibration and held-out): 0.9 us per iteration at
    2 to 8 blocks per SM, 1.6 at 16 (the bytes' rate)."""
    lk = hw.layer_norm_kernel
    r, w = io_bytes(op, graph)
    elem = max(1, round((w or r) / (rows * cols)))
    launch = op.launch or LaunchConfig()
    threads, iters = cfg["threads"], cfg["iterations"]
    regs = launch.regs_per_thread or int(lk["regs"])
    occ = occupancy(hw, threads, regs, 0, rows)
    per_sm = math.ceil(rows / hw.sm_count)
    active = min(hw.sm_count, rows)
    resident = min(rows, hw.sm_count * occ.blocks_per_sm)
    reread = resident * cols * elem > hw.l2_bytes * lk["reread_l2_share"]
    slice_bytes = threads * int(lk["vec_elems"]) * elem * (3 if reread else 2)
    rate = lk["stream_gbps"] * 1e9
    # the round trip: from L2 where the input is there (not `l2: cold`) and fits the same share of it, else HBM
    pre = LAYER_NORM_PREFIX[str(op.attrs["impl"])]
    warm = (op.attrs.get("l2") != "cold" and f"{pre}iter_ns_warm" in lk
            and rows * cols * elem <= hw.l2_bytes * lk["reread_l2_share"])
    latency = lk[f"{pre}iter_ns_warm" if warm else f"{pre}iter_ns"] * 1e-9
    # the busiest SM's full waves, then its partial one (closed form: no loop over the rows)
    full, part = divmod(per_sm, occ.blocks_per_sm)
    loops = full * iters * max(latency, occ.blocks_per_sm * active * slice_bytes / rate)
    if part:
        loops += iters * max(latency, part * active * slice_bytes / rate)
    waves = full + (1 if part else 0)
    blocks_s = per_sm * lk[f"{pre}block_ns"] * 1e-9
    mem_s = loops + blocks_s
    total = r + w + (rows * cols * elem if reread else 0)
    time = hw.kernel_fixed_s + mem_s
    stream = total / rate
    return KernelCost(
        time_s=time, compute_s=0.0, memory_s=mem_s, fixed_s=hw.kernel_fixed_s,
        limiter="hbm" if stream >= 0.5 * mem_s else "latency", category="memory", hbm_bytes=total,
        flops=float(rows * cols), bw_demand=min(1.0, total / time / hw.hbm_sustained_bps),
        sm_demand=min(1.0, rows / (hw.sm_count * occ.blocks_per_sm)),
        detail=MappingProxyType({"layer_norm_kernel": "rms" if pre else "vectorized", "grid": rows, "block": threads,
                                 "iterations": iters, "input_in_l2": warm, "blocks_per_sm": occ.blocks_per_sm, "waves": waves,
                                 "loops_us": round(loops * 1e6, 4), "blocks_us": round(blocks_s * 1e6, 4),
                                 "reread_from_hbm": reread}),
    )


# The two kernels of ATen's layer norm forward over rows that are not whole vectors (layer_norm_kernel.fb_*): each
# kernel's (threads, registers, round trip, round trip from L2) keys; the moments kernel also spends fb_moments_block_ns
# per wave on its block's Welford combine, the normalize kernel moves its wave's bytes at fb_forward_stream_gbps
FALLBACK_KERNELS = ("moments", "forward")


def _torch_layer_norm_fallback_cost(op: Op, graph: Graph, hw: Hardware, rows: int, cols: int) -> KernelCost:
    """PyTorch's layer norm forward over rows that are not whole 4-element vectors (`impl: torch_layer_norm`, cols
    not a multiple of vec_elems): ATen's two-kernel fallback (LayerNormKernelImplInternal, torch 2.11), a block per
    row each: RowwiseMomentsCUDAKernel (fb_moments_threads threads, scalar loads, Welford) and
    LayerNormForwardCUDAKernel (fb_forward_threads threads). Each thread of a wave of resident blocks waits a round
    trip per loop iteration (fb_*_iter_ns from HBM: `l2: cold` or an input past the L2 share; fb_*_iter_ns_warm from
    L2); the moments kernel's wave then spends fb_moments_block_ns combining its block's Welford partials, the
    normalize kernel's iterations also move the wave's bytes (x read, y written) at fb_forward_stream_gbps. The op
    is both kernels: two fixed costs (detail `kernels`: 2). The op attribute `fallback_kernel` (moments or forward;
    calibration cases only) prices one of them."""
    lk = hw.layer_norm_kernel
    r, w = io_bytes(op, graph)
    elem = _row_elem_bytes(op, graph, rows, cols)
    warm = op.attrs.get("l2") != "cold" and rows * cols * elem <= hw.l2_bytes * lk["reread_l2_share"]
    per_sm = math.ceil(rows / hw.sm_count)
    active = min(hw.sm_count, rows)
    only = op.attrs.get("fallback_kernel")
    parts: dict[str, float] = {}
    for name in FALLBACK_KERNELS:
        if only is not None and only != name:
            continue
        threads = int(lk[f"fb_{name}_threads"])
        occ = occupancy(hw, threads, int(lk[f"fb_{name}_regs"]), 0, rows)
        iters = math.ceil(cols / threads)
        latency = lk[f"fb_{name}_iter_ns_warm" if warm else f"fb_{name}_iter_ns"] * 1e-9
        if name == "moments":
            block_s = lk["fb_moments_block_ns"] * 1e-9
            full, part = divmod(per_sm, occ.blocks_per_sm)
            parts[name] = (full + (1 if part else 0)) * (iters * latency + block_s)
        else:
            rate = lk["fb_forward_stream_gbps"] * 1e9
            slice_bytes = threads * elem * 2  # x read, y written
            parts[name], _ = _waves_s(per_sm, occ.blocks_per_sm, iters,
                                      lambda n, lat=latency, sb=slice_bytes, rt=rate: lat + n * active * sb / rt)
    mem_s = sum(parts.values())
    kernels = len(parts)
    time = kernels * hw.kernel_fixed_s + mem_s
    total = r + w
    return KernelCost(
        time_s=time, compute_s=0.0, memory_s=mem_s, fixed_s=kernels * hw.kernel_fixed_s,
        limiter="latency", category="memory", hbm_bytes=total, flops=float(rows * cols),
        bw_demand=min(1.0, total / time / hw.hbm_sustained_bps), sm_demand=min(1.0, rows / hw.sm_count),
        detail=MappingProxyType({"layer_norm_kernel": "fallback", "kernels": kernels, "grid": rows,
                                 "input_in_l2": warm, **{f"{k}_us": round(v * 1e6, 4) for k, v in parts.items()}}),
    )


def _row_elem_bytes(op: Op, graph: Graph, rows: int, cols: int) -> int:
    """Bytes per element of the op's [rows, cols] operand (its first read of that size; else 2)."""
    for name in op.reads:
        t = graph.tensors.get(name)
        if t is not None and t.numel == rows * cols:
            return max(1, round(t.nbytes / t.numel))
    return 2


def _waves_s(per_sm: int, resident: int, iters: int, step_s: Any) -> tuple[float, int]:
    """(seconds, waves) of an SM running per_sm blocks, `resident` at a time, each wave `iters` loop iterations
    of step_s(blocks in the wave) seconds: the full waves, then the partial one (closed form)."""
    full, part = divmod(per_sm, resident)
    t = full * iters * step_s(resident) + (iters * step_s(part) if part else 0.0)
    return t, full + (1 if part else 0)


# The layer_norm_kernel key prefix of each backward kernel's times: layer norm's (bwd_*, gb_*) and RMS norm's (the
# same two kernels with their rms flag: rms_bwd_*, rms_gb_*, its gamma kernel summing dy * x_hat only); the launch
# keys (threads, vec_elems, regs, gb_block_*, gb_rows_per_load) and the L2 share are shared
BWD_PREFIX = {"torch_layer_norm_bwd": "", "torch_gamma_beta": "", "torch_rms_norm_bwd": "rms_", "torch_rms_gamma": "rms_"}


def _torch_layer_norm_bwd_cost(op: Op, graph: Graph, hw: Hardware, rows: int, cols: int,
                               cfg: dict[str, int]) -> KernelCost:
    """PyTorch's layer norm backward, grad-input kernel (`impl: torch_layer_norm_bwd`; RMS norm's, `impl:
    torch_rms_norm_bwd`, reads the rms_ keys: BWD_PREFIX): ATen's
    layer_norm_grad_input_kernel_vectorized, a block of `threads` per row with the forward's vector loads, its
    registers resident as the forward's. Each thread's two loops (the row's two sums, then the gradient) read the
    row slices of x and the output gradient and write the input gradient's; a wave of resident blocks takes, per
    iteration, the round trip (bwd_iter_ns with the inputs in HBM: `l2: cold` or inputs past the L2 share;
    bwd_iter_ns_warm from L2) plus the wave's bytes at bwd_stream_gbps (the two add: fitted on the calibration's
    backwards, where the wave's time grows with its blocks from the first one on). Past the L2 share of resident
    rows, bwd_reread_streams of the row slices are read again from HBM in the second loop. No block term: the
    block's two sums are a plain reduction (the forward's Welford one is its block_ns)."""
    lk = hw.layer_norm_kernel
    r, w = io_bytes(op, graph)
    elem = _row_elem_bytes(op, graph, rows, cols)
    launch = op.launch or LaunchConfig()
    threads, iters = cfg["threads"], cfg["iterations"]
    occ = occupancy(hw, threads, launch.regs_per_thread or int(lk["regs"]), 0, rows)
    per_sm = math.ceil(rows / hw.sm_count)
    active = min(hw.sm_count, rows)
    resident = min(rows, hw.sm_count * occ.blocks_per_sm)
    reread = resident * cols * elem > hw.l2_bytes * lk["reread_l2_share"]
    streams = 3 + (lk["bwd_reread_streams"] if reread else 0)  # x, dy read, dx written (+ the re-read)
    slice_bytes = threads * int(lk["vec_elems"]) * elem * streams
    pre = BWD_PREFIX[str(op.attrs["impl"])]
    rate = lk[f"{pre}bwd_stream_gbps"] * 1e9
    warm = (op.attrs.get("l2") != "cold" and 2 * rows * cols * elem <= hw.l2_bytes * lk["reread_l2_share"])
    latency = lk[f"{pre}bwd_iter_ns_warm" if warm else f"{pre}bwd_iter_ns"] * 1e-9
    mem_s, waves = _waves_s(per_sm, occ.blocks_per_sm, iters, lambda n: latency + n * active * slice_bytes / rate)
    total = r + w + (lk["bwd_reread_streams"] * rows * cols * elem if reread else 0)
    time = hw.kernel_fixed_s + mem_s
    return KernelCost(
        time_s=time, compute_s=0.0, memory_s=mem_s, fixed_s=hw.kernel_fixed_s,
        limiter="hbm" if total / rate >= 0.5 * mem_s else "latency", category="memory", hbm_bytes=total,
        flops=float(rows * cols), bw_demand=min(1.0, total / time / hw.hbm_sustained_bps),
        sm_demand=min(1.0, rows / (hw.sm_count * occ.blocks_per_sm)),
        detail=MappingProxyType({"layer_norm_kernel": f"{pre}grad_input", "grid": rows, "block": threads, "iterations": iters,
                                 "input_in_l2": warm, "blocks_per_sm": occ.blocks_per_sm, "waves": waves,
                                 "reread_from_hbm": reread}),
    )


def torch_gamma_beta_config(hw: Hardware, rows: int, cols: int) -> dict[str, int]:
    """ATen's layer norm gamma/beta gradient (GammaBetaBackwardCUDAKernelTemplate, torch 2.11): a block of
    32 columns x gb_block_y threads (gb_block_y_few_rows up to gb_few_rows rows: both read off the profiled
    kernels), each thread summing its column over every block_y-th row, gb_rows_per_load rows per loop
    iteration (profile layer_norm_kernel)."""
    lk = hw.layer_norm_kernel
    by = int(lk["gb_block_y_few_rows"] if rows <= lk["gb_few_rows"] else lk["gb_block_y"])
    cols_per_block = int(lk["gb_block_x"])
    return {"block_x": cols_per_block, "block_y": by, "grid": math.ceil(cols / cols_per_block),
            "iterations": math.ceil(rows / (by * int(lk["gb_rows_per_load"])))}


def _torch_gamma_beta_cost(op: Op, graph: Graph, hw: Hardware, rows: int, cols: int) -> KernelCost:
    """PyTorch's layer norm backward, gamma/beta kernel (`impl: torch_gamma_beta`, an op over `axis: rows`; RMS norm's
    gamma kernel, `impl: torch_rms_gamma`, reads the rms_ keys: BWD_PREFIX): the
    column sums of dy * x_hat and dy (torch_gamma_beta_config). Every iteration of a wave of resident blocks takes
    the longer of the round trip (gb_iter_ns with the inputs in HBM, gb_iter_ns_warm in L2) and the wave's bytes
    of that iteration (32-column strips of x and dy: short row segments) at gb_stream_gbps."""
    lk = hw.layer_norm_kernel
    r, w = io_bytes(op, graph)
    elem = _row_elem_bytes(op, graph, rows, cols)
    cfg = torch_gamma_beta_config(hw, rows, cols)
    threads, grid, iters = cfg["block_x"] * cfg["block_y"], cfg["grid"], cfg["iterations"]
    launch = op.launch or LaunchConfig()
    occ = occupancy(hw, threads, launch.regs_per_thread or int(lk["regs"]), 0, grid)
    per_sm = math.ceil(grid / hw.sm_count)
    active = min(hw.sm_count, grid)
    slice_bytes = threads * int(lk["gb_rows_per_load"]) * 2 * elem  # x and dy
    pre = BWD_PREFIX[str(op.attrs["impl"])]
    rate = lk[f"{pre}gb_stream_gbps"] * 1e9
    warm = (op.attrs.get("l2") != "cold" and 2 * rows * cols * elem <= hw.l2_bytes * lk["reread_l2_share"])
    latency = lk[f"{pre}gb_iter_ns_warm" if warm else f"{pre}gb_iter_ns"] * 1e-9
    mem_s, waves = _waves_s(per_sm, occ.blocks_per_sm, iters,
                            lambda n: max(latency, n * active * slice_bytes / rate))
    time = hw.kernel_fixed_s + mem_s
    total = r + w
    return KernelCost(
        time_s=time, compute_s=0.0, memory_s=mem_s, fixed_s=hw.kernel_fixed_s,
        limiter="hbm" if total / rate >= 0.5 * mem_s else "latency", category="memory", hbm_bytes=total,
        flops=float(2 * rows * cols), bw_demand=min(1.0, total / time / hw.hbm_sustained_bps),
        sm_demand=min(1.0, grid / (hw.sm_count * occ.blocks_per_sm)),
        detail=MappingProxyType({"layer_norm_kernel": f"{pre}gamma_beta", "grid": grid, "block": threads,
                                 "iterations": iters, "input_in_l2": warm, "blocks_per_sm": occ.blocks_per_sm,
                                 "waves": waves}),
    )


def row_layout(launch: LaunchConfig, op: Op, default_threads: int) -> tuple[int, int, int]:
    """(threads per block, threads per row, rows per block) of a row-wise reduction.

    The launch's `threads_per_row` / `rows_per_block` win over the op's `threads_per_row`
    attribute; a block without them covers one row; without a block, it is their product.
    """
    per_row = launch.threads_per_row or (int(op.attrs["threads_per_row"]) if "threads_per_row" in op.attrs else None)
    rows = launch.rows_per_block
    threads = launch.block or (per_row * rows if per_row and rows else default_threads)
    if per_row is None:
        per_row = max(1, threads // rows) if rows else threads
    rows = rows or max(1, threads // per_row)
    return threads, per_row, rows


def reduction_cost(op: Op, graph: Graph, hw: Hardware) -> KernelCost:
    rows, cols = int(op.attrs["rows"]), int(op.attrs["cols"])
    if min(rows, cols) <= 0:
        raise KernelsimError(f"op '{op.name}': reduction dimensions must be positive (rows={rows}, cols={cols})")
    if op.attrs.get("impl") == "torch_reduce" and "iter_ns_vec_warm" in hw.reduce_kernel:
        return _torch_reduce_cost(op, graph, hw, rows, cols)
    if (op.attrs.get("impl") == "torch_softmax" and "load_ns" in hw.softmax_kernel
            and op.attrs.get("axis", "cols") == "cols"):
        return _torch_softmax_cost(op, graph, hw, rows, cols)
    impl = op.attrs.get("impl")
    if impl == "torch_softmax_bwd" and "bwd_warp_elem_ns" in hw.softmax_kernel and op.attrs.get("axis", "cols") == "cols":
        return _torch_softmax_bwd_cost(op, graph, hw, rows, cols)
    if (impl in LAYER_NORM_PREFIX and f"{LAYER_NORM_PREFIX[impl]}iter_ns" in hw.layer_norm_kernel
            and op.attrs.get("axis", "cols") == "cols"
            and (ln := torch_layer_norm_config(hw, cols)) is not None):
        return _torch_layer_norm_cost(op, graph, hw, rows, cols, ln)
    if (impl == "torch_layer_norm" and "fb_moments_iter_ns" in hw.layer_norm_kernel
            and op.attrs.get("axis", "cols") == "cols" and torch_layer_norm_config(hw, cols) is None):
        return _torch_layer_norm_fallback_cost(op, graph, hw, rows, cols)
    if (impl in ("torch_layer_norm_bwd", "torch_rms_norm_bwd")
            and f"{BWD_PREFIX[impl]}bwd_iter_ns" in hw.layer_norm_kernel
            and op.attrs.get("axis", "cols") == "cols" and (ln := torch_layer_norm_config(hw, cols)) is not None):
        return _torch_layer_norm_bwd_cost(op, graph, hw, rows, cols, ln)
    if (impl in ("torch_gamma_beta", "torch_rms_gamma") and f"{BWD_PREFIX[impl]}gb_iter_ns" in hw.layer_norm_kernel
            and op.attrs.get("axis") == "rows"):
        return _torch_gamma_beta_cost(op, graph, hw, rows, cols)
    passes = max(1, int(op.attrs.get("passes", 1)))
    numel = rows * cols
    r, w = io_bytes(op, graph)
    math_ops = op.attrs.get("math", {})
    if op.attrs.get("axis", "cols") == "rows":
        launch = op.launch or LaunchConfig(block=hw.library.reduction_threads)
        op = op.with_(launch=launch)
        return streaming_cost(op, graph, hw, numel=numel, bytes_read=r * passes, bytes_written=w,
                              inflight_per_elem=read_bytes_per_elem(op, graph, numel), math_ops=math_ops,
                              inflight_cap=hw.library.reduction_vector_bytes, default_grid=column_sum_grid(hw, rows, cols))
    launch = op.launch or LaunchConfig(block=hw.library.reduction_threads)
    threads, per_row, rows_per_block = row_layout(launch, op, hw.library.reduction_threads)
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
        bw, lim = bandwidth(hw, sms, blocks / sms * threads * hw.library.reduction_vector_bytes)
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
