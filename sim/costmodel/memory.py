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

from sim.hardware import Hardware, Occupancy


def bandwidth(hw: Hardware, active_sms: float, inflight_per_sm: float) -> tuple[float, str]:
    """Achievable bandwidth (bytes/s) and what limits it."""
    little = active_sms * inflight_per_sm / hw.mem_latency_s
    n = hw.bw_knee_exponent
    sustained = hw.hbm_sustained_bps
    low, high = min(little, sustained), max(little, sustained)
    smooth = low * (1.0 + (high / low) ** -n) ** (-1.0 / n)  # (X^-n + B^-n)^(-1/n), scaled to stay finite
    per_sm = active_sms * hw.per_sm_max_bps
    if per_sm < smooth:
        return per_sm, "tail"
    return smooth, ("occupancy" if little < sustained else "hbm")


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
