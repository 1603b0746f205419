"""Memory-side physics shared by the families: streaming time from bytes in flight (Little's law).

A streaming kernel keeps `inflight` bytes outstanding per SM. With unloaded DRAM latency L,
Little's law gives X = SMs × inflight / L. Near the sustained ceiling B, queueing makes the
loaded latency grow, so the achieved bandwidth bends smoothly from X to B:
bw = (X^-n + B^-n)^(-1/n), n the profile's `bandwidth_knee_exponent` (fitted on a sweep of
the bytes in flight). One SM cannot stream faster than `per_sm_max_gbps`. Small transfers
never reach peak because there is not enough data to keep the pipe full (one latency at
least), and tails (a last partial wave) run with fewer SMs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from sim.errors import KernelsimError
from sim.hardware import Hardware, Occupancy


def smooth_min(x: float, ceiling: float, n: float) -> float:
    """(x^-n + ceiling^-n)^(-1/n): x far below the ceiling, bending smoothly onto it."""
    if x <= 0.0 or ceiling <= 0.0:
        return 0.0
    low, high = min(x, ceiling), max(x, ceiling)
    return low * (1.0 + (high / low) ** -n) ** (-1.0 / n)  # scaled to stay finite


def bandwidth(hw: Hardware, active_sms: float, inflight_per_sm: float) -> tuple[float, str]:
    """Achievable bandwidth (bytes/s) and what limits it. A profile whose numbers leave no bandwidth at all (a
    latency or rates so far out of range that the result underflows) is an error naming the profile, not a
    division by zero later."""
    little = active_sms * inflight_per_sm / hw.mem_latency_s
    sustained = hw.hbm_sustained_bps
    smooth = smooth_min(little, sustained, hw.bw_knee_exponent)
    per_sm = active_sms * hw.per_sm_max_bps
    bw, lim = (per_sm, "tail") if per_sm < smooth else (smooth, "occupancy" if little < sustained else "hbm")
    if not 0.0 < bw < math.inf and inflight_per_sm > 0:
        raise KernelsimError(f"hardware profile '{hw.name}': streaming bandwidth comes out {bw:g} B/s "
                             f"(memory.latency_ns, hbm_sustained_gbps, per_sm_max_gbps out of range)")
    return bw, lim


def stream_time(hw: Hardware, total_bytes: float, occ: Occupancy, inflight_per_thread: float) -> tuple[float, str, float]:
    """Time to stream `total_bytes` with the given residency; returns (seconds, limiter, bw share).

    Blocks are spread evenly; the full waves run with `blocks_per_sm` resident blocks on
    every SM, the last partial wave with fewer, so the tail runs at a lower bandwidth.
    """
    if total_bytes <= 0:
        return 0.0, "launch", 0.0
    threads_per_block = occ.threads_per_block
    per_wave_blocks = hw.sm_count * occ.blocks_per_sm
    full_waves, rem = divmod(occ.grid, per_wave_blocks)
    bytes_per_block = total_bytes / occ.grid
    t = 0.0
    lim = "hbm"
    if full_waves:
        bw_full, lim = bandwidth(hw, hw.sm_count, occ.blocks_per_sm * threads_per_block * inflight_per_thread)
        t += full_waves * per_wave_blocks * bytes_per_block / bw_full
    if rem:
        sms = min(hw.sm_count, rem)
        blocks_per_active_sm = rem / sms
        bw_rem, lim_rem = bandwidth(hw, sms, blocks_per_active_sm * threads_per_block * inflight_per_thread)
        t_rem = rem * bytes_per_block / bw_rem
        if not full_waves:
            lim = lim_rem
        elif t_rem > 0.5 * (t + t_rem):
            lim = "tail"
        t += t_rem
    # One DRAM round trip before the first byte lands.
    t += hw.mem_latency_s
    share = min(1.0, (total_bytes / t) / hw.hbm_sustained_bps)
    return t, lim, share


def spill_bandwidth(hw: Hardware, active_sms: float, resident_threads_per_sm: float, footprint_per_sm: float) -> tuple[float, bool]:
    """Bandwidth of local-memory (spill) traffic and whether it leaves the SM.

    Spills whose footprint (every resident thread's spill area) fits in L1 run at the L1 rate,
    which is per SM: a grid of 8 blocks gets 8 SMs' worth. Larger footprints go through L2 to
    memory: each thread keeps `spill_inflight_bytes_per_thread` in flight (its spill loads feed
    the next instructions, so few are outstanding), and Little's law over the active SMs gives
    the rate, bending onto the off-chip spill ceiling as DRAM bandwidth does.
    """
    if footprint_per_sm <= hw.l1_bytes_per_sm:
        return hw.spill_bps * active_sms / hw.sm_count, False
    ceiling = hw.spill_offchip_bps if hw.spill_offchip_bps is not None else hw.hbm_sustained_bps
    if hw.spill_inflight_bytes_per_thread is None:
        return ceiling, True
    little = active_sms * resident_threads_per_sm * hw.spill_inflight_bytes_per_thread / hw.mem_latency_s
    return smooth_min(little, ceiling, hw.bw_knee_exponent), True


def l1_miss_share(hw: Hardware, footprint_per_sm: float) -> float:
    """Share of spill accesses that miss L1 when the lines an SM's resident threads touch (their spill
    areas and the input lines of their loads in flight) exceed its L1 capacity: 0 when the footprint F
    fits in C. Past it, each thread stores its spills and loads them back before it touches them again
    (a cyclic reuse over F), and each miss evicts a line with no regard to reuse: a line survives the
    F·m misses between its store and its load with probability exp(-F·m/C), so the miss share m solves
    1 - m = exp(-(F/C)·m) (m → 0 as F → C, → 1 as F ≫ C; no fitted constant)."""
    ratio = footprint_per_sm / hw.l1_bytes_per_sm
    if ratio <= 1.0:
        return 0.0
    lo, hi = 1e-12, 1.0  # f(m) = 1 - m - exp(-ratio·m) is > 0 between its roots 0 and the miss share, < 0 after
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if 1.0 - mid - math.exp(-ratio * mid) > 0:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def reload_miss_share(distances: tuple[tuple[int, int], ...], resident_threads_per_sm: float,
                      l1_free_bytes: float) -> float:
    """Share of a kernel's local loads that miss L1: a reload finds its word still there while the bytes every
    resident thread touched since (its reload distance x the resident threads: they run the same straight-line
    code side by side) fit in the SM's free L1; `distances` are (distance bytes, load bytes) per thread."""
    total = sum(b for _, b in distances)
    if total <= 0:
        return 0.0
    return sum(b for d, b in distances if d * resident_threads_per_sm > l1_free_bytes) / total


def spill_time(hw: Hardware, traffic_bytes: float, active_sms: float, resident_threads_per_sm: float,
               footprint_per_sm: float, miss_share: float | None = None) -> tuple[float, float]:
    """(seconds, share of the traffic that leaves the SM) to move `traffic_bytes` of local-memory loads and
    stores (a spill area stored once and loaded once: twice its bytes).

    With the profile's `memory.spill_l1_partial` on, a footprint past L1 splits the traffic: the share
    that hits L1 at the L1 spill rate, the misses (l1_miss_share) at the off-chip rate; off, the whole
    traffic runs at one rate, L1's when the footprint fits, else off-chip (spill_bandwidth). A given
    `miss_share` (memory.spill_l1_reuse: from the kernel's reload distances) splits it the same way."""
    if traffic_bytes <= 0:
        return 0.0, 0.0
    if miss_share is None and not hw.spill_l1_partial:
        bw, offchip = spill_bandwidth(hw, active_sms, resident_threads_per_sm, footprint_per_sm)
        return traffic_bytes / bw, 1.0 if offchip else 0.0
    miss = miss_share if miss_share is not None else l1_miss_share(hw, footprint_per_sm)
    l1_bw, _ = spill_bandwidth(hw, active_sms, resident_threads_per_sm, 0.0)
    t = traffic_bytes * (1.0 - miss) / l1_bw
    if miss > 0:
        off_bw, _ = spill_bandwidth(hw, active_sms, resident_threads_per_sm, float("inf"))
        t += traffic_bytes * miss / off_bw
    return t, miss


def dirty_writeback_time(hw: Hardware, op_attrs: Mapping[str, object], read_bytes: float) -> float:
    """An L2 full of dirty lines (a written flush before the call; op attribute `l2_dirty`): the lines a cold
    kernel's reads evict are written back first, up to the L2's capacity -- min(bytes read, L2) at
    memory.l2_dirty_writeback_gbps. 0 where the op is not marked or the profile has no rate. The GEMMs'
    cold stream (sim.costmodel.gemm) and the reductions' (sim.costmodel.reduction) both pay it."""
    if not op_attrs.get("l2_dirty") or hw.l2_dirty_writeback_bps is None:
        return 0.0
    return min(read_bytes, hw.l2_bytes) / hw.l2_dirty_writeback_bps
