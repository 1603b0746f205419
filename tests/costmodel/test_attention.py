"""sim.costmodel.attention by hand on the test profile: flash attention at efficiency 0.6 forward and
0.45 backward of 989.4 TFLOP/s, a K ramp of skv / (skv + 256), tiles of 128 queries on 100 SMs,
4000 GB/s, 500 ns latency, 2 us fixed cost; decode streams the KV cache."""

from __future__ import annotations

import pytest

from sim.costmodel import kernel_cost
from sim.costmodel.attention import causal_share
from sim.hardware import Hardware
from tests.costmodel.conftest import one_op_graph

PEAK, FIXED, LATENCY, HBM = 989.4e12, 2e-6, 500e-9, 4000e9


def attention(hw: Hardware, b: int, h: int, sq: int, skv: int, d: int, **attrs: object):  # type: ignore[no-untyped-def]
    tensors = {"q": ((b, h, sq, d), "bf16"), "k": ((b, h, skv, d), "bf16"), "v": ((b, h, skv, d), "bf16"),
               "o": ((b, h, sq, d), "bf16")}
    op, graph = one_op_graph("attention", {"batch": b, "heads": h, "seq_q": sq, "seq_kv": skv, "head_dim": d, **attrs},
                             tensors, reads=("q", "k", "v"), writes=("o",))
    return kernel_cost(op, graph, hw)


def test_causal_share_counts_whole_diagonal_tiles() -> None:
    assert causal_share(1024, 1024, 128) == 9 / 16  # 8 tiles per side: (8 + 1) / 16
    # key tiles of 256: query tile i runs ceil((i + 1) / 2) of 4 key tiles: 1+1+2+2+3+3+4+4 = 20 of 32
    assert causal_share(1024, 1024, 128, key_tile=256) == 20 / 32
    assert causal_share(1024, 1024, 256) == 5 / 8  # the profile's query tile sets the diagonal: 4 per side


def test_query_tile_comes_from_the_profiles_library_section(testgpu: Hardware) -> None:
    # library.attention.query_tile 64 instead of 128: 8 heads x 1024 queries make 128 tiles, the 100 SMs fill
    from dataclasses import replace

    hw = replace(testgpu, library=replace(testgpu.library, attention_query_tile=64))
    assert attention(testgpu, 1, 8, 1024, 1024, 128).detail["tiles"] == 64
    cost = attention(hw, 1, 8, 1024, 1024, 128)
    assert (cost.detail["tiles"], cost.sm_demand, cost.limiter) == (128, 1.0, "tensor_core")


def test_forward_prefill(testgpu: Hardware) -> None:
    # 8 heads x 1024 queries: 64 query tiles on 100 SMs (fill 0.64), ramp 1024 / 1280 = 0.8
    flops = 4 * 8 * 1024 * 1024 * 128
    compute = flops / (PEAK * 0.6 * 0.8 * 0.64)
    cost = attention(testgpu, 1, 8, 1024, 1024, 128)
    assert cost.compute_s == pytest.approx(compute, rel=1e-12)
    assert cost.memory_s == pytest.approx(4 * 8 * 1024 * 128 * 2 / HBM + LATENCY, rel=1e-12)
    assert cost.time_s == pytest.approx(FIXED + compute, rel=1e-12)
    assert (cost.limiter, cost.sm_demand) == ("tail", 0.64)


def test_causal_and_backward(testgpu: Hardware) -> None:
    flops = 4 * 8 * 1024 * 1024 * 128 * 9 / 16
    causal = attention(testgpu, 1, 8, 1024, 1024, 128, causal=True)
    assert causal.compute_s == pytest.approx(flops / (PEAK * 0.6 * 0.8 * 0.64), rel=1e-12)
    backward = attention(testgpu, 1, 8, 1024, 1024, 128, causal=True, direction="backward")
    assert backward.compute_s == pytest.approx(2.5 * flops / (PEAK * 0.45 * 0.8 * 0.64), rel=1e-12)


def test_decode_streams_the_kv_cache(testgpu: Hardware) -> None:
    # 2 x 16 = 32 (batch, head) blocks, keys split in min(ceil(200 / 32), ceil(4096 / 1024)) = 4:
    # 128 blocks fill the 100 SMs, so the cache streams at the sustained 4000 GB/s.
    nbytes = 2 * (2 * 16 * 1 * 128 * 2) + 2 * (2 * 16 * 4096 * 128 * 2)  # q, o and k, v
    cost = attention(testgpu, 2, 16, 1, 4096, 128)
    assert cost.time_s == pytest.approx(FIXED + LATENCY + nbytes / HBM, rel=1e-12)
    assert (cost.limiter, cost.detail["kv_splits"]) == ("hbm", 4)
    # 2 heads, 2048 keys: 2 splits, 4 blocks on 100 SMs: 4 % of the bandwidth
    small = attention(testgpu, 1, 2, 1, 2048, 128)
    small_bytes = 2 * (2 * 128 * 2) + 2 * (2 * 2048 * 128 * 2)
    assert small.time_s == pytest.approx(FIXED + LATENCY + small_bytes / (HBM * 0.04), rel=1e-12)
    assert small.limiter == "tail"
