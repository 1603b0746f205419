"""sim.costmodel.reduction by hand on the test profile (100 SMs, 4000 GB/s, 500 ns latency, 20 ns per
reduction step, 2 us fixed cost). A row-wise kernel runs one block of 128 threads per row by default
(48 estimated registers: 10 blocks per SM, 1000 per wave); each sweep of a wave takes the longer of
one memory round trip plus log2(128) = 7 reduction steps, and its bytes at the bandwidth of one
16-byte vector in flight per thread."""

from __future__ import annotations

import pytest

from sim.costmodel import kernel_cost
from sim.hardware import Hardware
from tests.costmodel.conftest import one_op_graph

LATENCY, SYNC = 500e-9, 20e-9 * 7


def rows_op(rows: int, cols: int, passes: int = 1):  # type: ignore[no-untyped-def]
    return one_op_graph("reduction", {"rows": rows, "cols": cols, "passes": passes},
                        {"x": ((rows, cols), "bf16"), "y": ((rows, cols), "bf16")}, reads=("x",), writes=("y",))


def test_layer_norm_sized_rows_stream_in_waves(testgpu: Hardware) -> None:
    # 1024 rows of 4096 bf16: a full wave of 1000 blocks (10 per SM: 10 x 128 x 16 B in flight per SM,
    # Little's law 4.096 TB/s, held to 4000 GB/s), then 24 blocks on 24 SMs (1 x 128 x 16 B each:
    # 24 x 2048 / 500 ns = 98.304 GB/s). Each row reads and writes 8192 bytes.
    full = 1000 * 16384 / 4000e9
    tail = 24 * 16384 / (24 * 2048 / LATENCY)
    op, graph = rows_op(1024, 4096)
    cost = kernel_cost(op, graph, testgpu)
    assert max(full, LATENCY + SYNC) == full and max(tail, LATENCY + SYNC) == tail  # bandwidth, not the chain
    assert cost.memory_s == pytest.approx(full + tail, rel=1e-9)
    assert cost.time_s == pytest.approx(2e-6 + full + tail, rel=1e-9)
    assert cost.limiter == "occupancy"  # the last wave's: few bytes in flight
    assert cost.hbm_bytes == 2 * 1024 * 4096 * 2


def test_short_rows_wait_on_the_round_trip_and_reduction(testgpu: Hardware) -> None:
    # 100 rows of 256 bf16, two sweeps (statistics, then normalize): one wave of 100 blocks. Each sweep
    # moves at most 100 x 1024 B, a fraction of a microsecond at 409.6 GB/s, so each takes one round trip
    # plus 7 reduction steps: 2 x (500 + 140) ns = 1.28 us, under the 2 us fixed cost.
    op, graph = rows_op(100, 256, passes=2)
    cost = kernel_cost(op, graph, testgpu)
    assert cost.memory_s == pytest.approx(2 * (LATENCY + SYNC), rel=1e-12)
    assert cost.time_s == pytest.approx(2e-6 + 2 * (LATENCY + SYNC), rel=1e-12)
    assert cost.limiter == "launch"
    assert cost.hbm_bytes == 2 * 100 * 256 * 2 + 100 * 256 * 2  # read twice, written once
