"""sim.costmodel.layout by hand on the test profile: copies over PCIe and the copy engine, and
transposes at the profile's 0.7 of a copy's bandwidth."""

from __future__ import annotations

import pytest

from sim.costmodel import kernel_cost
from sim.graph import LaunchConfig
from sim.hardware import Hardware
from tests.costmodel.conftest import one_op_graph

FIXED, LATENCY = 2e-6, 500e-9


def test_host_to_device_copy_runs_over_pcie(testgpu: Hardware) -> None:
    # 64 MB at the profile's 64 GB/s PCIe, no SMs taken
    op, graph = one_op_graph("copy", {"bytes": 64e6, "direction": "h2d"})
    cost = kernel_cost(op, graph, testgpu)
    assert cost.time_s == pytest.approx(FIXED + 64e6 / 64e9, rel=1e-12)
    assert (cost.limiter, cost.sm_demand) == ("link", 0.0)


def test_device_copy_on_the_copy_engine_moves_half_the_bytes_each_way(testgpu: Hardware) -> None:
    # `bytes` counts read + written; the copy engine moves the payload once at 4000 GB/s
    op, graph = one_op_graph("copy", {"bytes": 8e6, "engine": "copy_engine"})
    cost = kernel_cost(op, graph, testgpu)
    assert cost.time_s == pytest.approx(FIXED + 4e6 / 4000e9, rel=1e-12)
    assert cost.limiter == "hbm"


def _layout(hw: Hardware, transform: str):  # type: ignore[no-untyped-def]
    n = 4096
    op, graph = one_op_graph("layout", {"transform": transform}, {"x": ((n, n), "bf16"), "y": ((n, n), "bf16")},
                             reads=("x",), writes=("y",))
    return kernel_cost(op, graph, hw)


def test_contiguous_streams_like_a_copy_and_transpose_at_its_bandwidth_factor(testgpu: Hardware) -> None:
    # 2^24 bf16 elements as in the elementwise test: 16 full waves of 1000 blocks at 4000 GB/s and 384
    # blocks at 1.572864 TB/s, 4096 bytes per block; a transpose streams the same bytes / 0.7.
    per_block = 2**24 * 4 / 16384
    streaming = 16 * 1000 * per_block / 4000e9 + 384 * per_block / (100 * 3.84 * 128 * 16 / LATENCY)
    contiguous, transpose = _layout(testgpu, "contiguous"), _layout(testgpu, "transpose")
    assert contiguous.memory_s == pytest.approx(streaming + LATENCY, rel=1e-9)
    assert transpose.memory_s == pytest.approx(streaming / 0.7 + LATENCY, rel=1e-9)
    assert transpose.time_s == pytest.approx(FIXED + streaming / 0.7 + LATENCY, rel=1e-9)
    assert contiguous.category == transpose.category == "layout"


def test_a_device_copy_without_launch_runs_the_profiles_memcpy_kernel(testgpu: Hardware) -> None:
    # library.memcpy: 128 threads x 32 elements of 2 bytes per block; 64 MB (32 MB each way) = 2^24 / 4096 blocks
    from dataclasses import replace

    from sim.graph import LaunchConfig

    op, graph = one_op_graph("copy", {"bytes": 2.0 ** 26})
    detail = kernel_cost(op, graph, testgpu).detail
    assert (detail["grid"], detail["block"], detail["elems_per_thread"]) == (2 ** 24 // 4096, 128, 32)
    hw = replace(testgpu, library=replace(testgpu.library, memcpy_launch=LaunchConfig(block=256, elems_per_thread=8,
                                                                                      regs_per_thread=32)))
    detail = kernel_cost(op, graph, hw).detail
    assert (detail["grid"], detail["block"], detail["elems_per_thread"]) == (2 ** 24 // 2048, 256, 8)


def test_driver_memcpy_through_a_clean_l2_has_the_profiles_memcpy_fixed_cost(testgpu: Hardware) -> None:
    # a copy op with no launch config is the driver's memcpy; `l2: cold` swaps only its fixed cost
    import dataclasses

    hw = dataclasses.replace(testgpu, memcpy_clean_fixed_s=1.5e-6)
    plain_op, graph = one_op_graph("copy", {"bytes": 1e6})
    cold_op, _ = one_op_graph("copy", {"bytes": 1e6, "l2": "cold"})
    plain, cold = kernel_cost(plain_op, graph, hw), kernel_cost(cold_op, graph, hw)
    assert plain.fixed_s == FIXED and cold.fixed_s == 1.5e-6
    assert cold.time_s == pytest.approx(plain.time_s - FIXED + 1.5e-6, rel=1e-12)
    assert cold.memory_s == plain.memory_s
    # absent from the profile, or a copy kernel with its own launch config: the default price
    assert kernel_cost(cold_op, graph, testgpu).time_s == plain.time_s
    launched, g2 = one_op_graph("copy", {"bytes": 1e6, "l2": "cold"}, launch=LaunchConfig(block=256, elems_per_thread=8))
    assert kernel_cost(launched, g2, hw).fixed_s == FIXED


def test_driver_memcpy_behind_a_dirty_l2_writes_back_what_it_evicts(testgpu: Hardware) -> None:
    # `l2_dirty` (a flush that wrote before the call) adds the GEMMs' write-back term: the lines the copy's reads and
    # writes allocate (its HBM bytes), up to the L2's capacity, at memory.l2_dirty_writeback_gbps
    import dataclasses

    hw = dataclasses.replace(testgpu, memcpy_clean_fixed_s=1.5e-6, l2_dirty_writeback_bps=8e12)
    for nbytes in (1e6, 4 * hw.l2_bytes):
        cold_op, graph = one_op_graph("copy", {"bytes": nbytes, "l2": "cold"})
        dirty_op, _ = one_op_graph("copy", {"bytes": nbytes, "l2": "cold", "l2_dirty": True})
        cold, dirty = kernel_cost(cold_op, graph, hw), kernel_cost(dirty_op, graph, hw)
        extra = min(nbytes, hw.l2_bytes) / 8e12
        assert dirty.time_s == pytest.approx(cold.time_s + extra, rel=1e-12)
        assert dirty.memory_s == pytest.approx(cold.memory_s + extra, rel=1e-12) and dirty.fixed_s == 1.5e-6
    # no rate in the profile: nothing to add
    op, graph = one_op_graph("copy", {"bytes": 1e6, "l2": "cold", "l2_dirty": True})
    no_rate = dataclasses.replace(hw, l2_dirty_writeback_bps=None)
    assert kernel_cost(op, graph, no_rate).time_s == kernel_cost(one_op_graph("copy", {"bytes": 1e6, "l2": "cold"})[0],
                                                                 graph, no_rate).time_s


def test_held_out_copies_are_described_in_the_l2_state_their_harness_left() -> None:
    # the held-out sets flush L2 with a written buffer unless a record says otherwise (as for GEMMs and sums)
    from sim.calibrate.heldout_cases import heldout_case

    rec = {"bench": "copy", "numel": 2048, "tensor_bytes": 4096,
           "kernels": [{"name": "Memcpy DtoD (Device -> Device)", "duration_us": 1.1}]}
    attrs = [dict(heldout_case({**rec, **state}).graph.ops[0].attrs)  # type: ignore[union-attr]
             for state in ({}, {"l2_state": "dirty"}, {"l2_state": "clean"})]
    assert attrs == [{"l2": "cold", "l2_dirty": True}, {"l2": "cold", "l2_dirty": True}, {"l2": "cold"}]
