"""sim.costmodel.gemm by hand on the test profile: 100 SMs, bf16 tensor cores at 989.4 TFLOP/s,
max efficiency 0.8, tiles of 128 x 256, K half-efficiency at 256, misaligned factor 0.5, 4000 GB/s,
500 ns memory latency, 2 us fixed cost; FP32 pipes 128 lanes/SM at 1 GHz; no correction table."""

from __future__ import annotations

import pytest

from sim.costmodel import kernel_cost
from sim.errors import KernelsimError
from sim.hardware import Hardware
from tests.costmodel.conftest import one_op_graph

BF16_PEAK, FIXED, LATENCY, HBM = 989.4e12, 2e-6, 500e-9, 4000e9


def gemm(hw: Hardware, m: int, n: int, k: int, dtype: str = "bf16"):  # type: ignore[no-untyped-def]
    op, graph = one_op_graph("gemm", {"m": m, "n": n, "k": k, "dtype": dtype})
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
