"""Elementwise kernels (and the streaming core reused by reductions, copies and layouts).

Time = fixed + max(memory, compute) + spill traffic, where
- memory streams the minimum HBM bytes at the bandwidth that the kernel's bytes in flight
  allow (occupancy from its launch config: registers/thread, block size, shared memory);
- compute counts each named math op's instructions per unit (FP32, SFU, INT) from the
  profile's `op_costs`, plus per-element addressing/conversion instructions, against the
  unit rates, slowed when too few warps are resident to hide latency;
- registers past the per-thread limit spill to local memory (store + load per thread).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import MappingProxyType

from sim.costmodel import KernelCost
from sim.costmodel.memory import reload_miss_share, spill_time, stream_time
from sim.errors import KernelsimError
from sim.graph import DTYPE_BYTES, Graph, LaunchConfig, Op
from sim.hardware import Hardware, Occupancy, occupancy

# NB: a library kernel whose launch config a workload does not give runs the library's defaults,
# the profile's `library.elementwise` (PyTorch's vectorized elementwise kernels: threads per block,
# one vector of that many bytes per input per thread). Registers come from the estimator.


def default_elems_per_thread(hw: Hardware, graph: Graph, op: Op) -> int:
    widest = max((DTYPE_BYTES[graph.tensors[t].dtype] for t in op.reads + op.writes), default=2)
    return max(1, int(hw.library.elementwise_vector_bytes // widest))


def estimate_registers(hw: Hardware, elems_per_thread: int) -> int:
    """Registers per thread of an elementwise kernel holding `elems_per_thread` elements.

    Linear in the elements a thread holds (the profile's fit on compiled Triton kernels);
    may exceed the per-thread limit, in which case the occupancy calculator reports spills.
    """
    return int(math.ceil(hw.register_base + hw.registers_per_element * elems_per_thread))


def launch_share(op: Op) -> float:
    """The share of its op's work one kernel does: 1/N for each of an op's `launches: N` kernels."""
    return float(op.attrs.get("launch_share", 1.0))


def numel_of(op: Op, graph: Graph) -> int:
    share = launch_share(op)
    if "numel" in op.attrs:
        n = int(op.attrs["numel"])
        if n < 1:  # a kernel over no elements: PyTorch launches none, and every per-element term divides by it
            raise KernelsimError(f"op '{op.name}': numel must be >= 1 (got {n})")
        return max(1, math.ceil(n * share))
    for t in op.writes + op.reads:
        return max(1, math.ceil(graph.tensors[t].numel * share))
    raise KernelsimError(f"op '{op.name}': cannot tell its element count (give 'numel' or a tensor)")


def io_bytes(op: Op, graph: Graph) -> tuple[float, float]:
    """(bytes read, bytes written): each tensor once (the minimum HBM traffic), this kernel's share."""
    share = launch_share(op)
    r = sum(graph.tensors[t].nbytes for t in op.reads) * share
    w = sum(graph.tensors[t].nbytes for t in op.writes) * share
    return r, w


def instructions(hw: Hardware, math_ops: Mapping[str, float], op_name: str) -> tuple[float, float, float]:
    """Per-element instructions on (fp32, sfu, int) for the named math ops."""
    fp32 = sfu = integer = 0.0
    for name, count in math_ops.items():
        cost = hw.op_costs.get(name)
        if cost is None:
            raise KernelsimError(
                f"op '{op_name}': math op '{name}' has no cost in hardware profile '{hw.name}'"
                f" (known: {', '.join(sorted(hw.op_costs))})"
            )
        fp32 += count * cost[0]
        sfu += count * cost[1]
        integer += count * cost[2]
    return fp32, sfu, integer


def resident_warps_per_sm(occ: Occupancy) -> float:
    """Warps an active SM really holds: the occupancy limit, or fewer when the grid is too small
    to give every SM its full count (64 blocks on 132 SMs: one block per active SM)."""
    warps_per_block = occ.warps_per_sm / occ.blocks_per_sm
    blocks = min(float(occ.blocks_per_sm), occ.grid / occ.active_sms)
    return blocks * warps_per_block


def latency_hiding(hw: Hardware, warps_per_scheduler: float) -> float:
    """Fraction of the peak issue rate a scheduler reaches with `warps_per_scheduler` resident warps.

    Little's law on the dependent-instruction latency: w warps, each with an instruction ready
    every L/ilp cycles, issue at most w/W of the peak, W = the profile's `warps_to_hide_latency`.
    As with DRAM bandwidth near its ceiling, the bend is smooth (issue-slot and dispatch-port
    conflicts grow as the pipes fill): rate = (1 + (W/w)^n)^(-1/n) with n the profile's
    `latency_hiding_exponent`; without it, the hard threshold min(1, w/W).
    """
    if warps_per_scheduler <= 0:
        return 0.0
    ratio = hw.warps_to_hide_latency / warps_per_scheduler
    n = hw.latency_hiding_exponent
    if n is None:
        return min(1.0, 1.0 / ratio)
    try:
        return float((1.0 + ratio ** n) ** (-1.0 / n))
    except OverflowError:  # far below the knee (ratio**n past the float range): the same curve, divided by ratio first
        return float((1.0 + ratio ** -n) ** (-1.0 / n) / ratio)


def busiest_sm_block_rounds(hw: Hardware, occ: Occupancy) -> float:
    """Blocks' worth of full-rate issue time the busiest SM spends on its share of the grid.

    Blocks go to SMs as slots free up, so one SM runs ceil(grid / SMs) blocks: full rounds of
    `blocks_per_sm` blocks, then its last few blocks alone, at the (lower) issue rate their warps
    reach. Each full round costs blocks_per_sm / hide(blocks_per_sm), the last r blocks r / hide(r).
    """
    per_sm = math.ceil(occ.grid / occ.active_sms)
    full, last = divmod(per_sm, max(occ.blocks_per_sm, 1))
    warps_per_block = occ.warps_per_sm / max(occ.blocks_per_sm, 1)
    rounds = 0.0
    if full:
        rounds += full * occ.blocks_per_sm / latency_hiding(hw, occ.blocks_per_sm * warps_per_block / hw.schedulers_per_sm)
    if last:
        rounds += last / latency_hiding(hw, last * warps_per_block / hw.schedulers_per_sm)
    return rounds


def compute_time(hw: Hardware, op: Op, numel: float, math_ops: Mapping[str, float],
                 occ: Occupancy, vector_fill: float = 1.0, vector_elements: int = 8,
                 elems_per_thread: float | None = None) -> tuple[float, str, float, float]:
    """(seconds, busiest unit, FP32 instructions per element, latency-hiding factor) of the math.

    A thread pays some instructions once per iteration whatever elements it holds (program id,
    offsets, masks, pointers): the profile's `thread_instr` over its `elems_per_thread` elements
    (a streaming kernel's; a reduction's per-row loop costs are in its own fit). Without it, the older form: `vector_fill` is the share of a 16-byte vector a thread's
    elements fill (1 element of bf16: 1/8) and a thread whose elements fill only part of one pays
    `partial_vector_instr` (per vector access) over fewer elements,
    partial_vector_instr × (1/fill − 1) / vector_elements more instructions per element.
    """
    fp32, sfu, integer = instructions(hw, math_ops, op.name)
    issue_per_element = hw.elementwise_instr_per_element
    if op.library == "triton" and hw.thread_instr is not None and elems_per_thread is not None:
        issue_per_element += hw.thread_instr / max(elems_per_thread, 1e-3)
    elif vector_fill < 1.0 and hw.partial_vector_instr is not None:
        issue_per_element += hw.partial_vector_instr * (1.0 / max(vector_fill, 1e-3) - 1.0) / vector_elements
    hide = latency_hiding(hw, resident_warps_per_sm(occ) / hw.schedulers_per_sm)
    rate = occ.active_sms * hw.clock_hz * hide
    triton = op.library == "triton"
    if triton and hw.thread_instr is not None:  # the busiest SM's rounds of blocks, each at the rate its warps reach
        rate = occ.active_sms * hw.clock_hz * (occ.grid / occ.active_sms) / busiest_sm_block_rounds(hw, occ)
    # Each unit's cycles per element add up: the measured fused kernels (erf and Philox in
    # one thread) take the sum of their parts, not the slowest part.
    unit_times = {
        "fp32": numel * fp32 / (hw.fp32_lanes_per_sm * rate),
        "sfu": numel * sfu / (hw.sfu_lanes_per_sm * rate),
        "int": numel * integer / (hw.int_lanes_per_sm * rate),
        "issue": numel * issue_per_element
        / (hw.schedulers_per_sm * hw.issue_per_scheduler * hw.warp_size * rate),
    }
    comp_lim = max(unit_times, key=lambda k: unit_times[k])
    total = sum(unit_times.values())
    return total, comp_lim, fp32, hide


def streaming_cost(
    op: Op,
    graph: Graph,
    hw: Hardware,
    *,
    numel: int,
    bytes_read: float,
    bytes_written: float,
    inflight_per_elem: float,
    math_ops: Mapping[str, float],
    category: str | None = None,
    bandwidth_factor: float = 1.0,
    inflight_cap: float | None = None,
    default_grid: int | None = None,
) -> KernelCost:
    """Cost of a kernel that streams `numel` elements once with the op's launch config.

    `inflight_cap` bounds the bytes a thread keeps in flight (a loop with a carried
    dependency issues one vector, waits, then the next); `default_grid` is the library's
    grid when the op gives none (e.g. one block per row).
    """
    launch = op.launch or LaunchConfig()
    threads = launch.block or hw.library.elementwise_threads
    grid = launch.grid or default_grid
    if launch.elems_per_thread:
        ept = launch.elems_per_thread  # elements a thread holds at once (one iteration)
    elif grid:
        # A fixed grid (grid-stride loop, one block per row): each iteration moves one vector.
        ept = min(default_elems_per_thread(hw, graph, op), max(1, math.ceil(numel / (grid * threads))))
    else:
        ept = default_elems_per_thread(hw, graph, op)
    regs = launch.regs_per_thread or estimate_registers(hw, ept)
    grid = grid or max(1, math.ceil(numel / (threads * ept)))
    occ = occupancy(hw, threads, regs, launch.smem_per_block or 0, grid)
    total = bytes_read + bytes_written
    # Bytes in flight per thread: the loads of one iteration, issued before they are needed.
    inflight = ept * inflight_per_elem
    if inflight_cap is not None:
        inflight = min(inflight, inflight_cap)
    mem_s, mem_lim, bw_share = stream_time(hw, total / bandwidth_factor, occ, max(inflight, 1.0))
    vector_elems = default_elems_per_thread(hw, graph, op)
    comp_s, comp_lim, fp32, hide = compute_time(hw, op, numel, math_ops, occ, min(1.0, ept / vector_elems),
                                                vector_elems, ept)
    # Registers estimated past the limit spill; the compiler spills more words than the excess.
    estimated_spill = occ.spilled_regs_per_thread * 4 * hw.spill_words_per_excess_register
    spill_per_thread = estimated_spill + (launch.spill_bytes_per_thread or 0)
    spill_bytes = spill_per_thread * occ.threads_per_block * grid
    # Spilled values of every resident thread stay in L1 when they fit; else they go to memory. With
    # memory.spill_l1_partial, the input lines of each thread's loads in flight share L1 with its spills.
    resident_blocks = resident_warps_per_sm(occ) * hw.warp_size / occ.threads_per_block
    l1_per_thread = spill_per_thread + (inflight if hw.spill_l1_partial else 0.0)
    footprint = (l1_per_thread * occ.threads_per_block + (launch.smem_per_block or 0)) * resident_blocks
    # What the threads move: each spill area stored once and loaded once; with the profile's
    # memory.spill_traffic_from_accesses, the local loads and stores of the compiled kernel (ptxas -v) where the
    # launch gives them (plus the estimated spill's store and load), else past L1 the profile's traffic ratio.
    traffic_per_thread = 2.0 * spill_per_thread
    if hw.spill_traffic_from_accesses and launch.spill_traffic_bytes_per_thread is not None:
        traffic_per_thread = 2.0 * estimated_spill + launch.spill_traffic_bytes_per_thread
    elif hw.spill_traffic_from_accesses and hw.spill_offchip_traffic_ratio and footprint > hw.l1_bytes_per_sm:
        traffic_per_thread *= hw.spill_offchip_traffic_ratio
    spill_traffic = traffic_per_thread * occ.threads_per_block * grid
    miss = None
    # NB: memory.spill_l1_reuse is off in every shipped profile. Refitted under it on the shipped raw folder
    # (gpu11: sim.validate.spills' sources, refit_spills under each rule), the held-out l1_edge configs go from median
    # 14.6 / 13.1 / 13.2 % (A / C / F, signed -38 ... +11 %) to 21.2 / 22.8 / 21.9 % (-28 ... +31 %), wave 4's
    # off-chip configs 7.4 -> 19.6 %, fused_configs/heldout micro gain 5.43 -> 5.54 pp (heldout_w4 24.1 -> 30.7 pp);
    # with the misses at memory.l2_gbps where the grid's spills fit in L2, l1_edge 15.2 / 13.7 / 13.7 % but the
    # off-chip regime 8 -> 37 %. The l1_edge shortfall is at grids of one or two waves (-23 ... -36 %), not small ones.
    if hw.spill_l1_reuse and hw.spill_traffic_from_accesses and launch.spill_reload_distances \
            and launch.spill_traffic_bytes_per_thread is not None:
        # which reloads find their word still in L1: the compiled code's reload distances (memory.spill_l1_reuse)
        l1_free = hw.l1_bytes_per_sm - (launch.smem_per_block or 0) * resident_blocks
        miss = reload_miss_share(launch.spill_reload_distances, resident_blocks * occ.threads_per_block, l1_free)
    spill_s, offchip_share = spill_time(hw, spill_traffic, occ.active_sms, resident_blocks * occ.threads_per_block,
                                        footprint, miss)
    offchip = offchip_share > 0
    body = max(mem_s, comp_s)
    time = hw.kernel_fixed_s + body + spill_s
    if spill_s > body:
        limiter = "spill"
    elif comp_s > mem_s:
        limiter = comp_lim if hide >= 0.95 else "occupancy"
    else:
        limiter = mem_lim
    if body < hw.kernel_fixed_s and spill_s < hw.kernel_fixed_s:
        limiter = "launch"
    cat = category or ("compute" if comp_s > mem_s else "memory")
    return KernelCost(
        time_s=time,
        compute_s=comp_s,
        memory_s=mem_s + spill_s,
        fixed_s=hw.kernel_fixed_s,
        limiter=limiter,
        category=cat,
        hbm_bytes=total + spill_traffic * offchip_share,
        flops=numel * 2 * fp32,
        bw_demand=min(1.0, (total / time) / hw.hbm_sustained_bps) if time > 0 else 0.0,
        sm_demand=min(1.0, occ.grid / (hw.sm_count * occ.blocks_per_sm)),
        detail=MappingProxyType(
            {
                "grid": grid,
                "block": threads,
                "elems_per_thread": ept,
                "regs_per_thread": occ.regs_per_thread,
                "blocks_per_sm": occ.blocks_per_sm,
                "warps_per_sm": occ.warps_per_sm,
                "occupancy": round(occ.occupancy_fraction, 4),
                "occupancy_limiter": occ.limiter,
                "waves": occ.waves,
                "bw_share": round(bw_share, 4),
                "spill_bytes": spill_bytes,
                "spill_traffic_bytes": spill_traffic,
                "spill_offchip": offchip,
                "spill_l1_miss": round(offchip_share, 4),
                "latency_hiding": round(hide, 4),
            }
        ),
    )


def read_bytes_per_elem(op: Op, graph: Graph, numel: int) -> float:
    """Bytes each element keeps in flight: its loads from full-size inputs (broadcast inputs stay in
    cache). An op whose inputs are all smaller than its output (a gather, a concatenation) loads
    its inputs' bytes; a write-only op (a fill) has its stores in flight."""
    per = 0.0
    share = launch_share(op)
    for t in op.reads:
        ten = graph.tensors[t]
        if ten.numel * share >= numel:
            per += DTYPE_BYTES[ten.dtype] * ten.numel * share / numel
    if per == 0.0:
        # stores need no round trip to retire: a write-only kernel (a fill) keeps its stores in flight
        per = sum(graph.tensors[t].nbytes for t in (op.reads or op.writes)) * share / numel
    return per


def elementwise_cost(op: Op, graph: Graph, hw: Hardware) -> KernelCost:
    numel = numel_of(op, graph)
    r, w = io_bytes(op, graph)
    return streaming_cost(
        op,
        graph,
        hw,
        numel=numel,
        bytes_read=r,
        bytes_written=w,
        inflight_per_elem=read_bytes_per_elem(op, graph, numel),
        math_ops=op.attrs.get("math", {}),
    )
