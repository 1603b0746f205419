"""Memory-side physics shared by the families: streaming time from bytes in flight (Little's law).

A streaming kernel keeps `inflight` bytes outstanding per SM; with DRAM latency L its
bandwidth is min(sustained HBM, per-SM cap × SMs, SMs × inflight / L). Small transfers
never reach peak because there is not enough data to keep the pipe full (one latency at
least), and tails (a last partial wave) run with fewer SMs.
"""

from __future__ import annotations

from sim.hardware import Hardware, Occupancy


def bandwidth(hw: Hardware, active_sms: float, inflight_per_sm: float) -> tuple[float, str]:
    """Achievable bandwidth (bytes/s) and what limits it."""
    little = active_sms * inflight_per_sm / hw.mem_latency_s
    per_sm = active_sms * hw.per_sm_max_bps
    options = {"hbm": hw.hbm_sustained_bps, "occupancy": little, "tail": per_sm}
    lim = min(options, key=lambda k: options[k])
    return options[lim], lim


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
    lim_full = "hbm"
    bw_full = 0.0
    if full_waves:
        bw_full, lim_full = bandwidth(hw, hw.sm_count, occ.blocks_per_sm * threads_per_block * inflight_per_thread)
        t += full_waves * per_wave_blocks * bytes_per_block / bw_full
    lim = lim_full
    if rem:
        sms = min(hw.sm_count, rem)
        blocks_per_active_sm = rem / sms
        bw_rem, lim_rem = bandwidth(hw, sms, blocks_per_active_sm * threads_per_block * inflight_per_thread)
        t += rem * bytes_per_block / bw_rem
        if not full_waves:
            lim = lim_rem
            bw_full = bw_rem
        elif rem * bytes_per_block / bw_rem > 0.5 * t:
            lim = "tail"
    # One DRAM round trip before the first byte lands.
    t += hw.mem_latency_s
    share = min(1.0, (total_bytes / t) / hw.hbm_sustained_bps)
    return t, lim, share
