"""sim.costmodel.gemm by hand on the test profile: 100 SMs, bf16 tensor cores at 989.4 TFLOP/s,
max efficiency 0.8, tiles of 128 x 256, K half-efficiency at 256, misaligned factor 0.5, 4000 GB/s,
500 ns memory latency, 2 us fixed cost; FP32 pipes 128 lanes/SM at 1 GHz; no correction table."""

from __future__ import annotations

import dataclasses

import pytest

from sim.costmodel import kernel_cost
from sim.costmodel.gemm import alignment_bytes, correction
from sim.errors import KernelsimError
from sim.hardware import Hardware
from tests.costmodel.conftest import one_op_graph

BF16_PEAK, FIXED, LATENCY, HBM = 989.4e12, 2e-6, 500e-9, 4000e9


def gemm(hw: Hardware, m: int, n: int, k: int, dtype: str = "bf16", layout: str = "nn"):  # type: ignore[no-untyped-def]
    attrs = {"m": m, "n": n, "k": k, "dtype": dtype, **({"layout": layout} if layout != "nn" else {})}
    op, graph = one_op_graph("gemm", attrs)
    return kernel_cost(op, graph, hw)


def test_large_square_gemm_is_compute_bound_with_wave_quantization(testgpu: Hardware) -> None:
    # 4096^3: 32 x 16 = 512 tiles on 100 SMs: 6 waves, 512/600 of them busy; K efficiency 4096/4352
    eff = 0.8 * (512 / 600) * (4096 / (4096 + 256))
    compute = 2 * 4096**3 / (BF16_PEAK * eff)
    cost = gemm(testgpu, 4096, 4096, 4096)
    assert cost.compute_s == pytest.approx(compute, rel=1e-12)
    assert cost.memory_s == pytest.approx(3 * 4096 * 4096 * 2 / HBM + LATENCY, rel=1e-12)  # A, B, C once
    assert cost.time_s == pytest.approx(FIXED + compute, rel=1e-12)
    assert (cost.limiter, cost.category, cost.sm_demand) == ("tensor_core", "compute", 1.0)
    assert cost.flops == 2 * 4096**3


def test_one_tile_splits_k_to_fill_the_gpu(testgpu: Hardware) -> None:
    # 128 x 256 x 8192: one tile; split-K into min(100 // 1, 8192 // 256) = 32 slices of K = 256,
    # so 32 of 100 SMs busy (wave efficiency 0.32) and K efficiency 256 / 512 = 0.5.
    compute = 2 * 128 * 256 * 8192 / (BF16_PEAK * 0.8 * 0.32 * 0.5)
    # A, B, C in bf16 plus fp32 partials written and read back: 2 x 128 x 256 x 4 x 32
    hbm = (128 * 8192 + 8192 * 256 + 128 * 256) * 2 + 2 * 128 * 256 * 4 * 32
    cost = gemm(testgpu, 128, 256, 8192)
    assert cost.compute_s == pytest.approx(compute, rel=1e-12)
    assert cost.hbm_bytes == hbm
    assert cost.memory_s == pytest.approx(hbm / HBM + LATENCY, rel=1e-12)
    assert cost.time_s == pytest.approx(FIXED + max(compute, hbm / HBM + LATENCY), rel=1e-12)
    assert cost.limiter == "tail" and cost.sm_demand == pytest.approx(0.32)
    assert cost.detail["split_k"] == 32


def test_a_misaligned_row_stride_halves_throughput(testgpu: Hardware) -> None:
    # K = 4100: 8200-byte rows are not a multiple of 16 bytes; otherwise as the 4096^3 case
    eff = 0.8 * (512 / 600) * (4100 / (4100 + 256)) * 0.5
    cost = gemm(testgpu, 4096, 4096, 4100)
    assert cost.compute_s == pytest.approx(2 * 4096 * 4096 * 4100 / (BF16_PEAK * eff), rel=1e-12)
    assert cost.limiter == "tensor_core"


def test_alignment_is_read_on_the_layouts_leading_dimensions() -> None:
    # row-major A (m x k) has stride k, transposed A stride m; B (k x n) stride n, transposed B stride k; C stride n
    assert alignment_bytes(4096, 4096, 4100, "bf16") == 8  # 8200-byte rows of A
    assert alignment_bytes(4096, 4096, 4098, "bf16") == 4
    assert alignment_bytes(4096, 4097, 4096, "bf16") == 2  # odd N: B's and C's rows
    assert alignment_bytes(4097, 4096, 4096, "bf16") == 16  # M is no stride of a row-major GEMM
    assert alignment_bytes(16384, 4096, 1001, "bf16", "tn") == 16  # a weight gradient over 1001 tokens: K is no stride
    assert alignment_bytes(4096, 4096, 1001, "bf16", "nt") == 2  # but it is both operands' stride here
    assert alignment_bytes(1001, 4096, 4096, "bf16", "tn") == 2
    assert alignment_bytes(4096, 4096, 4095, "fp32") == 4


def test_a_transposed_operand_moves_the_alignment_check(testgpu: Hardware) -> None:
    # 4096 x 4096 x 4100 with A transposed: A's stride is M = 4096, so the fast path at full rate
    assert gemm(testgpu, 4096, 4096, 4100, layout="tn").compute_s == pytest.approx(
        gemm(testgpu, 4096, 4096, 4100).compute_s * 0.5, rel=1e-12)


def test_odd_strides_run_their_own_kernel_class_without_hopper_tile_waves(testgpu: Hardware) -> None:
    # with misaligned_odd_factor 0.25 in the profile: 4-/8-byte strides at 0.5, 2-byte strides at 0.25, each with
    # the K-depth efficiency only (those kernels run several small tiles per SM: no 128 x 256 tile waves)
    hw = dataclasses.replace(testgpu, gemm_misaligned_odd_factor=0.25)
    k_eff = 4100 / (4100 + 256)
    assert gemm(hw, 4096, 4096, 4100).compute_s == pytest.approx(
        2 * 4096 * 4096 * 4100 / (BF16_PEAK * 0.8 * k_eff * 0.5), rel=1e-12)
    odd = gemm(hw, 4096, 4097, 4096)
    assert odd.compute_s == pytest.approx(2 * 4096 * 4097 * 4096 / (BF16_PEAK * 0.8 * (4096 / 4352) * 0.25), rel=1e-12)
    assert odd.detail["alignment_bytes"] == 2
    # aligned shapes keep the tile waves: unchanged by the odd factor
    assert gemm(hw, 4096, 4096, 4096).compute_s == gemm(testgpu, 4096, 4096, 4096).compute_s


def test_the_correction_table_is_read_within_an_alignment_class(testgpu: Hardware) -> None:
    # points of one class never correct a shape of another: an odd shape next to 8-byte-aligned points gets none
    hw = dataclasses.replace(testgpu, gemm_misaligned_odd_factor=0.25,
                             gemm_correction=((4096, 4096, 4100, "bf16", 2.0), (4096, 4096, 4096, "bf16", 3.0)))
    assert correction(hw, 4096, 4096, 4100, "bf16") == pytest.approx(2.0)
    assert correction(hw, 4096, 4096, 4096, "bf16") == pytest.approx(3.0)
    assert correction(hw, 4096, 4096, 4097, "bf16") == 1.0
    assert correction(hw, 4096, 4096, 4100, "bf16", "tn") == pytest.approx(3.0)  # aligned as laid out


def test_the_library_tile_that_quantizes_least_is_chosen(testgpu: Hardware) -> None:
    # 1536 x 3000 x 2048 on 100 SMs: 128x256 tiles give 12 x 12 = 144 (two waves, 144/200 busy); 192x192 give
    # 8 x 16 = 128 (two waves too); 256x128 give 6 x 24 = 144; 160x320 (a made-up tile) 10 x 10 = 100 in one wave
    hw = dataclasses.replace(testgpu, gemm_tile_choices=((192, 192), (256, 128), (160, 320)))
    cost = gemm(hw, 1536, 3000, 2048)
    assert (cost.detail["tile_m"], cost.detail["tile_n"], cost.detail["waves"]) == (160, 320, 1)
    tile_eff = 1536 * 3000 / (1600 * 3200)
    assert cost.compute_s == pytest.approx(2 * 1536 * 3000 * 2048 / (BF16_PEAK * 0.8 * tile_eff * 2048 / 2304), rel=1e-12)
    assert cost.compute_s < gemm(testgpu, 1536, 3000, 2048).compute_s
    # thinner than one default tile in M: the skinny split-K kernels, priced with the default tile as before
    assert gemm(hw, 64, 3000, 2048).compute_s == gemm(testgpu, 64, 3000, 2048).compute_s


def test_fp32_runs_on_the_fp32_pipes(testgpu: Hardware) -> None:
    # no TF32: 2 FLOP x 128 lanes x 100 SMs x 1 GHz = 25.6 TFLOP/s
    eff = 0.8 * (512 / 600) * (4096 / 4352)
    cost = gemm(testgpu, 4096, 4096, 4096, "fp32")
    assert cost.compute_s == pytest.approx(2 * 4096**3 / (2 * 128 * 100 * 1e9 * eff), rel=1e-12)


def test_bad_dimensions_and_dtypes_are_errors(testgpu: Hardware) -> None:
    with pytest.raises(KernelsimError, match="must be positive"):
        gemm(testgpu, 0, 64, 64)
    with pytest.raises(KernelsimError, match="no tensor-core rate for dtype 'int8'"):
        gemm(testgpu, 64, 64, 64, "int8")


def test_cold_operands_stream_from_hbm_after_the_pipeline_ramp(testgpu: Hardware) -> None:
    # 8 x 4096 x 4096 with its operands in HBM (l2: cold) and a 2 us ramp: 16 tiles of 128 x 256, split-K
    # 6 ways; the stream is A + B + C plus the fp32 partials, at 4000 GB/s after the ramp
    import dataclasses

    from sim.costmodel.gemm import gemm_terms

    hw = dataclasses.replace(testgpu, gemm_cold_ramp_s=2e-6)
    op, graph = one_op_graph("gemm", {"m": 8, "n": 4096, "k": 4096, "dtype": "bf16", "l2": "cold"})
    cost = kernel_cost(op, graph, hw)
    t = gemm_terms(hw, 8, 4096, 4096, 1, "bf16")
    assert t["hbm_bytes"] == (8 * 4096 + 4096 * 4096 + 8 * 4096) * 2 + 2 * 8 * 4096 * 4 * t["split_k"]
    assert cost.memory_s == pytest.approx(2e-6 + t["hbm_bytes"] / HBM, rel=1e-12)
    assert cost.time_s == pytest.approx(FIXED + 2e-6 + t["hbm_bytes"] / HBM, rel=1e-12)
    assert cost.detail["l2"] == "cold" and cost.limiter == "hbm"
    # warm (the default), or a profile without the ramp: the operands-in-L2 path, as before
    assert kernel_cost(op, graph, testgpu).time_s == gemm(testgpu, 8, 4096, 4096).time_s


def test_below_one_default_tile_in_m_the_library_thin_tile_sets_padding_and_split_k(testgpu: Hardware) -> None:
    # gemm.small_m_row_step / small_m_tile_n: M rounded up to 8 rows, 64-wide N tiles (nvjet ..._64x40_ at M = 40)
    hw = dataclasses.replace(testgpu, gemm_small_m_row_step=8.0, gemm_small_m_tile_n=64.0)
    cost = gemm(hw, 40, 2048, 8192)
    assert (cost.detail["tile_m"], cost.detail["tile_n"]) == (40, 64)
    # 32 tiles on 100 SMs: split-K 3 (100 // 32), against 16 K slices of the default 128x256 tile's 8 tiles
    assert (cost.detail["tiles"], cost.detail["split_k"]) == (32, 3)
    assert gemm(testgpu, 40, 2048, 8192).detail["split_k"] == 12
    assert cost.detail["tile_eff"] == 1.0
    assert gemm(hw, 1, 4096, 4096).detail["tile_m"] == 8 and gemm(hw, 9, 4096, 4096).detail["tile_m"] == 16
    # fewer padded rows: less tensor-core work than the default tile's, and fewer split-K partials
    assert cost.compute_s < gemm(testgpu, 40, 2048, 8192).compute_s
    assert cost.hbm_bytes < gemm(testgpu, 40, 2048, 8192).hbm_bytes
    # at one default tile in M and above, or without the rule: as before
    assert gemm(hw, 128, 2048, 8192).time_s == gemm(testgpu, 128, 2048, 8192).time_s
    assert gemm(dataclasses.replace(hw, gemm_small_m_tile_n=None), 40, 2048, 8192).time_s == \
        gemm(testgpu, 40, 2048, 8192).time_s


def test_a_thin_kernels_k_loop_is_a_floor_at_one_sms_load_rate_and_the_l2s(testgpu: Hardware) -> None:
    # gemm.thin_fill_us / thin_sm_stream_gbps / thin_l2_stream_gbps: 1 x 1024 x 1024 runs 16 tiles of 8 x 64 on
    # 100 SMs; split-K min(100 // 16, 1024 // 1280) -> 1: one wave, each unit loads (8 + 64) rows x 1024 k x 2 bytes
    rule = dataclasses.replace(testgpu, gemm_small_m_row_step=8.0, gemm_small_m_tile_n=64.0,
                               gemm_small_m_min_k_slice=1280.0)
    hw = dataclasses.replace(rule, gemm_thin_fill_s=1.5e-6, gemm_thin_sm_stream_bps=100e9,
                             gemm_thin_l2_stream_bps=10000e9)
    cost = gemm(hw, 1, 1024, 1024)
    unit = (8 + 64) * 1024 * 2
    assert cost.detail["split_k"] == 1 and cost.detail["tiles"] == 16
    assert cost.time_s == pytest.approx(FIXED + 1.5e-6 + unit / 100e9, rel=1e-12)
    assert (cost.limiter, cost.category) == ("l2", "memory")
    assert cost.time_s > gemm(rule, 1, 1024, 1024).time_s  # the bytes alone (at HBM's rate) cost less
    # many SMs at once: the L2's aggregate rate binds (256 units of 64 columns x 4096 k, one wave each on 100 SMs)
    slow_l2 = dataclasses.replace(hw, gemm_thin_l2_stream_bps=2000e9)
    c2 = gemm(slow_l2, 1, 16384, 4096)
    assert c2.detail["tiles"] == 256 and c2.detail["waves"] == 3
    assert c2.time_s == pytest.approx(FIXED + 1.5e-6 + 256 * (8 + 64) * 4096 * 2 / 2000e9, rel=1e-12)
    # absent (any of the three) or M at one default tile: no K-loop term
    assert gemm(dataclasses.replace(hw, gemm_thin_fill_s=None), 1, 1024, 1024).time_s == gemm(rule, 1, 1024, 1024).time_s
    assert gemm(hw, 128, 1024, 1024).time_s == gemm(testgpu, 128, 1024, 1024).time_s


def test_thin_kernels_split_k_only_into_deep_slices_and_pay_the_reduction_kernel(testgpu: Hardware) -> None:
    rule = dataclasses.replace(testgpu, gemm_small_m_row_step=8.0, gemm_small_m_tile_n=64.0)
    deep = dataclasses.replace(rule, gemm_small_m_min_k_slice=1280.0)
    # 1 x 1024 x 4096: 16 tiles; 4 k-tiles of 64 per slice would split 6 ways (100 // 16), 1280-deep slices 3
    assert gemm(rule, 1, 1024, 4096).detail["split_k"] == 6
    assert gemm(deep, 1, 1024, 4096).detail["split_k"] == 3
    assert gemm(deep, 1, 1024, 2048).detail["split_k"] == 1
    # the split-K reduction kernel (gemm.thin_split_reduce_us): added where K is split, not otherwise
    red = dataclasses.replace(deep, gemm_thin_split_reduce_s=1.8e-6)
    assert gemm(red, 1, 1024, 4096).time_s == pytest.approx(gemm(deep, 1, 1024, 4096).time_s + 1.8e-6, rel=1e-12)
    assert gemm(red, 1, 1024, 2048).time_s == gemm(deep, 1, 1024, 2048).time_s
    # the default tile's split is not the thin kernels'
    assert gemm(dataclasses.replace(testgpu, gemm_small_m_min_k_slice=1280.0), 1, 1024, 4096).detail["split_k"] == \
        gemm(testgpu, 1, 1024, 4096).detail["split_k"]
