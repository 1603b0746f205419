"""Elementwise physics, hand-checkable: latency hiding as a smooth function of resident warps,
register files split among schedulers, partial residency of small grids, spills that overflow L1
limited by Little's law, and partial 16-byte vectors paying their instructions over fewer elements."""

from __future__ import annotations

import dataclasses
import math
from types import MappingProxyType

import pytest

from sim.costmodel import kernel_cost
from sim.costmodel.elementwise import latency_hiding, resident_warps_per_sm
from sim.costmodel.memory import l1_miss_share, spill_bandwidth
from sim.graph import Graph, LaunchConfig, Op, Tensor
from sim.hardware import Hardware, load_profile, occupancy


@pytest.fixture(scope="module")
def hw() -> Hardware:
    # Round numbers, so every expectation below can be checked by hand.
    base = load_profile("h200-sxm")
    return dataclasses.replace(base, warps_to_hide_latency=2.0, latency_hiding_exponent=4.0, mem_latency_s=500e-9,
                               spill_bps=10_000e9, spill_offchip_bps=1_000e9, spill_inflight_bytes_per_thread=16.0,
                               elementwise_instr_per_element=4.0, partial_vector_instr=16.0,
                               thread_instr=None)


def one_op(numel: int, launch: LaunchConfig, math_ops: dict[str, float]) -> tuple[Op, Graph]:
    tensors = {"x": Tensor("x", (numel,), "bf16"), "y": Tensor("y", (numel,), "bf16")}
    op = Op(name="k", kind="elementwise", reads=("x",), writes=("y",), launch=launch,
            attrs=MappingProxyType({"math": MappingProxyType(math_ops)}))
    return op, Graph(name="g", kind="training", params=MappingProxyType({}), tensors=MappingProxyType(tensors), ops=(op,))


def test_latency_hiding_is_smooth_and_reaches_the_threshold_form_without_an_exponent(hw: Hardware) -> None:
    # (1 + (W/w)^n)^(-1/n) with W = 2, n = 4: at w = W it is 2^(-1/4); far above W it is ~1.
    assert latency_hiding(hw, 2.0) == pytest.approx(2 ** -0.25)
    assert latency_hiding(hw, 1.0) == pytest.approx((1 + 2 ** 4) ** -0.25)
    assert latency_hiding(hw, 16.0) == pytest.approx((1 + (1 / 8) ** 4) ** -0.25)
    rates = [latency_hiding(hw, w) for w in (0.5, 1, 2, 3, 4, 8, 16)]
    assert rates == sorted(rates) and rates[-1] < 1.0
    threshold = dataclasses.replace(hw, latency_hiding_exponent=None)
    assert latency_hiding(threshold, 1.0) == pytest.approx(0.5)
    assert latency_hiding(threshold, 3.0) == 1.0


def test_latency_hiding_far_below_the_knee_is_finite(hw: Hardware) -> None:
    # a profile whose knee lies far above the resident warps (ratio**n past the float range) still prices
    # the curve, (1 + r^n)^(-1/n) = (1 + r^-n)^(-1/n) / r, instead of overflowing
    far = dataclasses.replace(hw, warps_to_hide_latency=1e120, latency_hiding_exponent=4.0)
    assert latency_hiding(far, 1.0) == pytest.approx(1e-120)
    assert latency_hiding(far, 2.0) == pytest.approx(2e-120)


def test_register_file_is_split_among_the_schedulers(hw: Hardware) -> None:
    # 200 registers × 32 threads = 6400 per warp; a scheduler's quarter (16384) holds 2 warps: 8 per SM,
    # so 4 blocks of 2 warps (the whole-SM count, 65536 // 6400 = 10 warps, would give 5).
    occ = occupancy(hw, 64, 200, 0, 10_000)
    assert (occ.blocks_per_sm, occ.warps_per_sm, occ.limiter) == (4, 8, "registers")
    # 32 registers: 1024 per warp, 16 per quarter, 64 per SM: the warp limit, as before.
    assert occupancy(hw, 128, 32, 0, 10_000).warps_per_sm == 64


def test_a_small_grid_holds_fewer_warps_than_its_occupancy_limit(hw: Hardware) -> None:
    # 64 blocks of 4 warps on 132 SMs: 64 SMs with one block each, whatever the 16 blocks that would fit.
    occ = occupancy(hw, 128, 32, 0, 64)
    assert occ.blocks_per_sm == 16 and occ.active_sms == 64
    assert resident_warps_per_sm(occ) == 4.0
    # 264 blocks: two per SM.
    assert resident_warps_per_sm(occupancy(hw, 128, 32, 0, 264)) == 8.0


def test_register_pressure_slows_a_compute_bound_kernel_by_the_hiding_factor(hw: Hardware) -> None:
    numel = 1 << 28
    heavy = {"erf": 40.0}  # far from the memory roofline
    times = {}
    for regs in (32, 200):
        op, graph = one_op(numel, LaunchConfig(block=128, elems_per_thread=8, regs_per_thread=regs), heavy)
        times[regs] = kernel_cost(op, graph, hw)
    lo, hi = times[32], times[200]
    assert lo.detail["warps_per_sm"] == 64 and hi.detail["warps_per_sm"] == 8  # 16 and 2 per scheduler
    expected = latency_hiding(hw, 16.0) / latency_hiding(hw, 2.0)
    assert hi.compute_s / lo.compute_s == pytest.approx(expected)
    assert hi.time_s / lo.time_s == pytest.approx(expected, rel=0.01)
    assert hi.limiter == "occupancy" and lo.limiter != "occupancy"


def test_a_small_grid_computes_with_its_resident_warps_only(hw: Hardware) -> None:
    # 64 blocks × 128 threads × 8 elements: one block (1 warp per scheduler) on each of 64 SMs.
    op, graph = one_op(64 * 128 * 8, LaunchConfig(block=128, elems_per_thread=8, regs_per_thread=32), {"erf": 40.0})
    cost = kernel_cost(op, graph, hw)
    assert cost.detail["latency_hiding"] == pytest.approx(latency_hiding(hw, 1.0), abs=1e-4)


def test_spills_in_l1_scale_with_active_sms_and_overflowing_spills_follow_littles_law(hw: Hardware) -> None:
    bw, off = spill_bandwidth(hw, 66, 256, 100_000)
    assert (bw, off) == (pytest.approx(10_000e9 * 66 / 132), False)
    # 4 SMs × 128 threads × 16 B in flight / 500 ns = 16.4 GB/s, far below the 1000 GB/s ceiling.
    bw, off = spill_bandwidth(hw, 4, 128, 1 << 20)
    little = 4 * 128 * 16 / 500e-9
    assert off and bw == pytest.approx((little ** -hw.bw_knee_exponent + 1e12 ** -hw.bw_knee_exponent)
                                       ** (-1 / hw.bw_knee_exponent))
    assert bw < little
    # Every SM full: Little's law gives 132 × 2048 × 16 / 500 ns = 8.7 TB/s, so the ceiling rules.
    bw, _ = spill_bandwidth(hw, 132, 2048, 1 << 22)
    assert 0.9e12 < bw < 1e12
    absent = dataclasses.replace(hw, spill_offchip_bps=None, spill_inflight_bytes_per_thread=None)
    assert spill_bandwidth(absent, 4, 128, 1 << 20) == (absent.hbm_sustained_bps, True)


def test_a_kernel_with_spills_overflowing_l1_pays_them_at_the_latency_bound_rate(hw: Hardware) -> None:
    # 4 blocks of 128 threads, 4000 spilled bytes each: footprint 512 KB > L1, 4 SMs at 16.4 GB/s at most.
    launch = LaunchConfig(block=128, elems_per_thread=128, regs_per_thread=32, spill_bytes_per_thread=4000)
    op, graph = one_op(4 * 128 * 128, launch, {})
    cost = kernel_cost(op, graph, hw)
    traffic = 2 * 4000 * 128 * 4
    assert cost.detail["spill_offchip"] is True
    assert cost.memory_s > traffic / (4 * 128 * 16 / 500e-9)
    assert cost.limiter == "spill"


def test_a_thread_with_part_of_a_vector_pays_the_vector_instructions_over_fewer_elements(hw: Hardware) -> None:
    free = dataclasses.replace(hw, fp32_lanes_per_sm=1e12, sfu_lanes_per_sm=1e12, int_lanes_per_sm=1e12)

    def issue_s(ept: int) -> float:
        op, graph = one_op(1 << 26, LaunchConfig(block=128, elems_per_thread=ept, regs_per_thread=32), {})
        return kernel_cost(op, graph, free).compute_s

    # bf16: 8 elements per 16-byte vector. Per element: 4, plus 16 × (8/ept − 1) / 8 at ept < 8.
    assert issue_s(16) == pytest.approx(issue_s(8))
    assert issue_s(1) / issue_s(8) == pytest.approx((4 + 16 * 7 / 8) / 4)
    assert issue_s(4) / issue_s(8) == pytest.approx((4 + 16 * 1 / 8) / 4)
    assert math.isfinite(issue_s(1))


def _triton_compute_s(hw: Hardware, numel: int, ept: int, math_ops: dict[str, float], block: int = 128,
                      regs: int = 32) -> float:
    op, graph = one_op(numel, LaunchConfig(block=block, elems_per_thread=ept, regs_per_thread=regs), math_ops)
    return kernel_cost(dataclasses.replace(op, library="triton"), graph, hw).compute_s


def test_a_triton_thread_pays_its_per_thread_instructions_over_its_elements(hw: Hardware) -> None:
    # issue only (the math units free): per element 4 + thread_instr / ept, whatever the vector fill;
    # 2^26 elements in blocks of 128 x ept: grids that share out evenly over 132 SMs would not, so the
    # ratios are taken at the same grid (numel scaled with ept)
    free = dataclasses.replace(hw, fp32_lanes_per_sm=1e12, sfu_lanes_per_sm=1e12, int_lanes_per_sm=1e12,
                               thread_instr=80.0)
    blocks = 132 * 16 * 64
    per_element = {ept: _triton_compute_s(free, blocks * 128 * ept, ept, {}) / (blocks * 128 * ept)
                   for ept in (1, 4, 16, 32)}
    for ept, t in per_element.items():
        assert t / per_element[1] == pytest.approx((4 + 80 / ept) / (4 + 80))
    # PyTorch's kernels do not pay it (they keep the partial-vector term)
    op, graph = one_op(1 << 26, LaunchConfig(block=128, elems_per_thread=16, regs_per_thread=32), {})
    assert kernel_cost(op, graph, free).compute_s == pytest.approx(
        kernel_cost(op, graph, dataclasses.replace(free, thread_instr=None)).compute_s)


def test_a_fused_triton_kernel_takes_the_sum_of_its_units(hw: Hardware) -> None:
    # measured on the calibration H200 (elementwise.json, 2^28 elements, BLOCK 1024 x 4 warps): GELU alone
    # 380.5 us + dropout alone 823.0 us = 1203.5 us against 1184.9 us fused: the units' times add up
    numel, ept = 132 * 16 * 64 * 128 * 8, 8
    costs = {**hw.op_costs, "rng": (0.0, 0.0, 50.0), "gelu": (40.0, 0.0, 0.0)}  # one unit each
    tr = dataclasses.replace(hw, thread_instr=0.0, op_costs=costs)
    issue = _triton_compute_s(tr, numel, ept, {})
    fused = _triton_compute_s(tr, numel, ept, {"rng": 1.0, "gelu": 1.0})
    assert fused == pytest.approx(_triton_compute_s(tr, numel, ept, {"gelu": 1.0})
                                  + _triton_compute_s(tr, numel, ept, {"rng": 1.0}) - issue)


def test_the_busiest_sm_sets_a_triton_kernels_compute_time(hw: Hardware) -> None:
    # 4-warp blocks of 32 registers: 16 per SM. 133 x 16 blocks: one SM gets 17 (a full round of 16 and a
    # last block alone at 1 warp per scheduler); the grid is priced as that SM's rounds, not 16.12 blocks
    from sim.costmodel.elementwise import busiest_sm_block_rounds

    tr = dataclasses.replace(hw, thread_instr=0.0)
    occ = occupancy(tr, 128, 32, 0, 133 * 16)
    rounds = 16 / latency_hiding(tr, 16.0) + 1 / latency_hiding(tr, 1.0)
    assert busiest_sm_block_rounds(tr, occ) == pytest.approx(rounds)
    even = _triton_compute_s(tr, 132 * 16 * 128 * 8, 8, {"erf": 40.0})
    uneven = _triton_compute_s(tr, 133 * 16 * 128 * 8, 8, {"erf": 40.0})
    assert uneven / even == pytest.approx(rounds / (16 / latency_hiding(tr, 16.0)))
    assert uneven / even > 133 / 132  # more than the average share


# -- whole kernels on the round-number test profile (tests/fixtures/profiles/testgpu.yaml) ----------
# 2^24 bf16 elements read and written: PyTorch's default 128 threads x 8 elements (one 16-byte
# vector), 24 + 3 x 8 = 48 registers -> 10 blocks per SM by registers, grid 2^24 / 1024 = 16384:
# 16 full waves of 1000 blocks and a last one of 384 (3.84 blocks per SM).
NUMEL = 2**24
BYTES = NUMEL * 2 * 2  # read x, write y
PER_BLOCK = BYTES / 16384


def _bf16_copy_like(testgpu: Hardware, math_ops: dict[str, float]):  # type: ignore[no-untyped-def]
    from tests.costmodel.conftest import one_op_graph

    op, graph = one_op_graph("elementwise", {"math": MappingProxyType(math_ops)},
                             {"x": ((NUMEL,), "bf16"), "y": ((NUMEL,), "bf16")}, reads=("x",), writes=("y",))
    return kernel_cost(op, graph, testgpu)


def _memory_s() -> float:
    # full waves: 10 x 128 x 16 B in flight per SM on 100 SMs / 500 ns = 4.096 TB/s, held to 4000 GB/s;
    # the last wave: 3.84 x 128 x 16 B per SM -> 1.572864 TB/s; then one 500 ns round trip.
    return 16 * 1000 * PER_BLOCK / 4000e9 + 384 * PER_BLOCK / (100 * 3.84 * 128 * 16 / 500e-9) + 500e-9


def test_plain_elementwise_kernel_is_bandwidth_bound(testgpu: Hardware) -> None:
    cost = _bf16_copy_like(testgpu, {})
    assert cost.memory_s == pytest.approx(_memory_s(), rel=1e-9)
    # 4 issue slots per element on 4 schedulers x 32 lanes at 1 GHz on 100 SMs (10 warps per scheduler:
    # latency fully hidden): 2^24 x 4 / 1.28e13 = 5.24 us, under the 17.9 us of memory
    assert cost.compute_s == pytest.approx(NUMEL * 4 / (4 * 32 * 1e9 * 100), rel=1e-12)
    assert cost.time_s == pytest.approx(2e-6 + _memory_s(), rel=1e-9)
    assert (cost.limiter, cost.category, cost.hbm_bytes) == ("hbm", "memory", BYTES)


def test_gelu_makes_it_compute_bound_and_units_add_up(testgpu: Hardware) -> None:
    # gelu in the test profile: 17 FP32 + 1 SFU per element; FP32 128 lanes, SFU 16 lanes per SM
    fp32 = NUMEL * 17 / (128 * 1e9 * 100)
    sfu = NUMEL * 1 / (16 * 1e9 * 100)
    issue = NUMEL * 4 / (4 * 32 * 1e9 * 100)
    cost = _bf16_copy_like(testgpu, {"gelu": 1})
    assert cost.compute_s == pytest.approx(fp32 + sfu + issue, rel=1e-12)
    assert cost.time_s == pytest.approx(2e-6 + fp32 + sfu + issue, rel=1e-12)
    assert (cost.limiter, cost.category) == ("fp32", "compute")
    assert cost.flops == NUMEL * 2 * 17


def test_unknown_math_op_is_an_error(testgpu: Hardware) -> None:
    from sim.errors import KernelsimError

    with pytest.raises(KernelsimError, match="math op 'no_such_op' has no cost"):
        _bf16_copy_like(testgpu, {"no_such_op": 1})


def test_the_l1_partial_switch_counts_the_loads_in_flight_and_is_off_in_every_shipped_profile(hw: Hardware) -> None:
    # 2 blocks of 128 threads per SM (255 registers), 64 bf16 elements per thread: 240 spilled words (960 B) per
    # thread fill 245,760 B of the 262,144 B L1 alone; the 128 B each thread loads in flight make 278,528 B.
    launch = LaunchConfig(block=128, elems_per_thread=64, regs_per_thread=255, spill_bytes_per_thread=960)
    op, graph = one_op(132 * 2 * 128 * 64 * 8, launch, {})
    off = kernel_cost(op, graph, hw)
    on = kernel_cost(op, graph, dataclasses.replace(hw, spill_l1_partial=True))
    assert off.detail["spill_offchip"] is False and off.detail["spill_l1_miss"] == 0.0
    footprint = (960 + 64 * 2) * 128 * 2
    assert on.detail["spill_l1_miss"] == pytest.approx(l1_miss_share(hw, footprint), abs=1e-4)
    assert on.time_s > off.time_s and on.hbm_bytes > off.hbm_bytes
    for name in ("h200-measured", "h200-sxm", "h100-sxm", "a100-sxm-80gb", "l40s"):
        assert load_profile(name).spill_l1_partial is False


def test_spill_traffic_counts_the_kernels_accesses_only_with_the_switch(hw: Hardware) -> None:
    # 32 registers, 128 elements per thread, 1084 spilled words (4336 B) per thread: past L1 at any residency.
    # ptxas counts 12,672 B of local stores and 18,192 B of local loads per thread (the backward kernel's
    # BLOCK 16384 x 4 warps, calibration/h200/spill_traffic): 3.56 x the area stored once and loaded once.
    plain = LaunchConfig(block=128, elems_per_thread=128, regs_per_thread=32, spill_bytes_per_thread=4336)
    counted = dataclasses.replace(plain, spill_traffic_bytes_per_thread=12_672 + 18_192)
    numel = 132 * 16 * 128 * 128
    on = dataclasses.replace(hw, spill_traffic_from_accesses=True)
    off = dataclasses.replace(hw, spill_traffic_from_accesses=False)
    off_plain = kernel_cost(*one_op(numel, plain, {}), off)
    off_counted = kernel_cost(*one_op(numel, counted, {}), off)
    on_counted = kernel_cost(*one_op(numel, counted, {}), on)
    threads = numel / 128
    # off: the accesses are not read; the area is stored once and loaded once
    assert off_counted.time_s == off_plain.time_s
    assert off_plain.detail["spill_traffic_bytes"] == pytest.approx(2 * 4336 * threads)
    assert off_plain.detail["spill_offchip"] is True
    # on: the compiled kernel's loads and stores, all off chip (hbm_bytes counts them)
    assert on_counted.detail["spill_traffic_bytes"] == pytest.approx((12_672 + 18_192) * threads)
    assert on_counted.hbm_bytes - off_plain.hbm_bytes == pytest.approx((12_672 + 18_192 - 2 * 4336) * threads)
    assert on_counted.time_s > off_plain.time_s


def test_without_accesses_the_offchip_traffic_ratio_applies_past_l1_only(hw: Hardware) -> None:
    on = dataclasses.replace(hw, spill_traffic_from_accesses=True, spill_offchip_traffic_ratio=3.0)
    past = LaunchConfig(block=128, elems_per_thread=128, regs_per_thread=32, spill_bytes_per_thread=4336)
    numel = 132 * 16 * 128 * 128
    c = kernel_cost(*one_op(numel, past, {}), on)
    assert c.detail["spill_offchip"] is True
    assert c.detail["spill_traffic_bytes"] == pytest.approx(3.0 * 2 * 4336 * numel / 128)
    # a footprint within L1 (2 blocks of 128 threads x 960 B per SM) keeps the area stored once, loaded once
    within = LaunchConfig(block=128, elems_per_thread=64, regs_per_thread=255, spill_bytes_per_thread=960)
    numel = 132 * 2 * 128 * 64 * 8
    c = kernel_cost(*one_op(numel, within, {}), on)
    assert c.detail["spill_offchip"] is False
    assert c.detail["spill_traffic_bytes"] == pytest.approx(2 * 960 * numel / 64)
    # given accesses win over the ratio
    counted = dataclasses.replace(past, spill_traffic_bytes_per_thread=10_000)
    numel = 132 * 16 * 128 * 128
    c = kernel_cost(*one_op(numel, counted, {}), on)
    assert c.detail["spill_traffic_bytes"] == pytest.approx(10_000 * numel / 128)
