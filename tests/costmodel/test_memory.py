"""sim.costmodel.memory by hand on the test profile: Little's law bandwidth, its ceilings, the
last partial wave of a streaming kernel, and where spills go."""

from __future__ import annotations

import dataclasses
import math

import pytest

from sim.costmodel.memory import (
    bandwidth,
    l1_miss_share,
    smooth_min,
    spill_bandwidth,
    spill_time,
    stream_time,
)
from sim.hardware import Hardware, occupancy

# testgpu: 100 SMs, 4000 GB/s sustained, 500 ns latency, per-SM cap 100 GB/s, knee exponent 1000
SUSTAINED, LATENCY, PER_SM = 4000e9, 500e-9, 100e9


def test_smooth_min_bends_onto_the_ceiling() -> None:
    assert smooth_min(2.0, 2.0, 1.0) == pytest.approx(1.0)  # n = 1: two equal rates in series give half
    assert smooth_min(1.0, 3.0, 1.0) == pytest.approx(0.75)  # (1 + 1/3)^-1
    assert smooth_min(1.0, 4.0, 1000.0) == pytest.approx(1.0)  # a large exponent: the plain minimum
    assert smooth_min(0.0, 4.0, 2.0) == 0.0


def test_bandwidth_little_law_then_sustained_then_per_sm_cap(testgpu: Hardware) -> None:
    # 100 SMs x 1000 B in flight / 500 ns = 200 GB/s: far below the ceiling, occupancy-bound
    assert bandwidth(testgpu, 100, 1000.0) == (pytest.approx(100 * 1000 / LATENCY), "occupancy")
    # 1 MB in flight per SM: Little's law gives 200 TB/s, the sustained 4000 GB/s bounds it
    assert bandwidth(testgpu, 100, 1e6) == (pytest.approx(SUSTAINED), "hbm")
    # 10 SMs cannot stream more than 10 x 100 GB/s, however much they keep in flight
    assert bandwidth(testgpu, 10, 1e6) == (pytest.approx(10 * PER_SM), "tail")


def test_stream_time_full_waves(testgpu: Hardware) -> None:
    # 128 threads x 32 registers: 16 blocks per SM (1600 per wave); 3200 blocks = 2 full waves.
    occ = occupancy(testgpu, 128, 32, 0, 3200)
    assert occ.blocks_per_sm == 16
    # 16 bytes in flight per thread: 16 x 128 x 16 = 32768 B per SM, Little's law 6.55 TB/s > 4000 GB/s
    t, limiter, share = stream_time(testgpu, 4e9, occ, 16.0)
    assert t == pytest.approx(4e9 / SUSTAINED + LATENCY, rel=1e-9)  # plus one round trip
    assert limiter == "hbm"
    assert share == pytest.approx(4e9 / t / SUSTAINED)


def test_stream_time_last_partial_wave_runs_slower(testgpu: Hardware) -> None:
    # 1650 blocks of 1 MB: a full wave of 1600 at 4000 GB/s, then 50 blocks on 50 SMs with one block
    # each: 50 x 128 x 16 B in flight / 500 ns = 204.8 GB/s.
    occ = occupancy(testgpu, 128, 32, 0, 1650)
    t, limiter, _ = stream_time(testgpu, 1650 * 1e6, occ, 16.0)
    full = 1600 * 1e6 / SUSTAINED
    tail = 50 * 1e6 / (50 * 128 * 16 / LATENCY)
    assert t == pytest.approx(full + tail + LATENCY, rel=1e-9)
    assert limiter == "hbm"  # the tail (244 us) is less than half of the 644 us


def test_spills_stay_in_l1_when_they_fit(testgpu: Hardware) -> None:
    # footprint within the 256 KiB L1: the L1 rate (5000 GB/s for 100 SMs) scaled to the active SMs
    assert spill_bandwidth(testgpu, 50, 1024, 100_000.0) == (pytest.approx(5000e9 * 50 / 100), False)
    # past L1, without a measured off-chip spill rate: the sustained HBM bandwidth
    assert spill_bandwidth(testgpu, 50, 1024, 300_000.0) == (pytest.approx(SUSTAINED), True)


def test_l1_miss_share_is_zero_while_the_footprint_fits_then_solves_the_random_replacement_equation(
        testgpu: Hardware) -> None:
    c = testgpu.l1_bytes_per_sm
    assert l1_miss_share(testgpu, 0.5 * c) == 0.0
    assert l1_miss_share(testgpu, c) == 0.0
    for ratio in (1.05, 1.2, 2.0, 4.0):
        m = l1_miss_share(testgpu, ratio * c)
        assert 1.0 - m == pytest.approx(math.exp(-ratio * m), abs=1e-9)  # 1 - m = exp(-(F/C)·m)
        assert 0.0 < m < 1.0
    # by hand: F = 2C gives m = 0.7968 (1 - 0.7968 = 0.2032 = exp(-1.5936))
    assert l1_miss_share(testgpu, 2 * c) == pytest.approx(0.7968, abs=1e-4)
    shares = [l1_miss_share(testgpu, r * c) for r in (1.01, 1.1, 1.5, 3.0, 10.0)]
    assert shares == sorted(shares) and shares[-1] > 0.9999


def test_spill_time_off_is_the_single_rate_and_on_splits_the_traffic_by_the_miss_share(testgpu: Hardware) -> None:
    off = dataclasses.replace(testgpu, spill_l1_partial=False, spill_offchip_bps=1000e9)
    on = dataclasses.replace(off, spill_l1_partial=True)
    c = testgpu.l1_bytes_per_sm
    # 2e6 bytes of traffic: a 1 MB spill area stored once and loaded once
    assert spill_time(off, 0.0, 50, 1024, 2 * c) == (0.0, 0.0)
    # off: L1's rate when the footprint fits, the off-chip ceiling (no in-flight limit in testgpu) past it
    l1_bw = spill_bandwidth(off, 50, 1024, 0.0)[0]
    assert spill_time(off, 2e6, 50, 1024, 0.5 * c) == (pytest.approx(2e6 / l1_bw), 0.0)
    assert spill_time(off, 2e6, 50, 1024, 1.2 * c) == (pytest.approx(2e6 / 1000e9), 1.0)
    # on: the same while the footprint fits; past it, the hits at L1's rate and the misses off chip
    assert spill_time(on, 2e6, 50, 1024, 0.5 * c) == spill_time(off, 2e6, 50, 1024, 0.5 * c)
    m = l1_miss_share(on, 1.2 * c)
    t, share = spill_time(on, 2e6, 50, 1024, 1.2 * c)
    assert share == pytest.approx(m)
    assert t == pytest.approx(2e6 * ((1 - m) / l1_bw + m / 1000e9))


def test_a_reload_misses_l1_when_its_distance_times_the_resident_threads_overflows_it() -> None:
    from sim.costmodel.memory import reload_miss_share

    distances = ((400, 100), (900, 300), (1100, 600))
    # 256 resident threads, 256 KiB free: 1024 bytes a thread; the 600 bytes reloaded at 1100 miss
    assert reload_miss_share(distances, 256, 262144) == pytest.approx(0.6)
    assert reload_miss_share(distances, 128, 262144) == 0.0
    assert reload_miss_share(distances, 1024, 262144) == 1.0
    assert reload_miss_share((), 256, 262144) == 0.0
