"""sim.ops.gemm: a matmul framework op's sizes and layout from its trace record (shapes and strides)."""

from __future__ import annotations

from typing import Any

from sim.costmodel.gemm import alignment_bytes
from sim.ingest.kineto import CpuOp
from sim.ops.gemm import gemm_fields


def cpu(name: str, dims: list[Any], types: list[Any], strides: list[Any] | None) -> CpuOp:
    return CpuOp(index=0, name=name, ts=0.0, end=1.0, tid=1, input_dims=dims, input_types=types, concrete=None,
                 args={}, input_strides=strides)


def test_a_weight_gradient_reads_a_transposed_activation() -> None:
    # the MLP trace's fc weight gradient: mm(x.T, grad) with x [1001 tokens, 4096] row-major, so A = x.T is
    # [4096, 1001] with strides (1, 4096): layout tn, and K = 1001 tokens is no stride (the fast path)
    op = cpu("aten::mm", [[4096, 1001], [1001, 16384]], ["c10::BFloat16"] * 2, [[1, 4096], [16384, 1]])
    f = gemm_fields(op)
    assert f == {"kind": "gemm", "m": 4096, "n": 16384, "k": 1001, "batch": 1, "dtype": "bf16", "layout": "tn"}
    assert alignment_bytes(f["m"], f["n"], f["k"], "bf16", f["layout"]) == 16
    assert alignment_bytes(f["m"], f["n"], f["k"], "bf16") == 2  # read as row-major it would be the odd path


def test_row_major_operands_and_traces_without_strides_stay_nn() -> None:
    dims, types = [[2048, 4096], [4096, 16384]], ["c10::BFloat16"] * 2
    assert "layout" not in (gemm_fields(cpu("aten::mm", dims, types, [[4096, 1], [16384, 1]])) or {})
    assert "layout" not in (gemm_fields(cpu("aten::mm", dims, types, None)) or {})
    # B transposed (a data gradient through W.T): nt
    assert gemm_fields(cpu("aten::mm", dims, types, [[4096, 1], [1, 4096]]))["layout"] == "nt"  # type: ignore[index]


def test_addmm_reads_its_matrices_past_the_bias_and_linear_takes_its_weight_as_b_transposed() -> None:
    addmm = cpu("aten::addmm", [[16384], [2048, 4096], [4096, 16384], [], []],
                ["c10::BFloat16"] * 3 + ["Scalar", "Scalar"], [[1], [1, 2048], [16384, 1], [], []])
    assert gemm_fields(addmm)["layout"] == "tn"  # type: ignore[index]
    linear = cpu("aten::linear", [[8, 256, 4096], [16384, 4096], [16384]], ["c10::BFloat16"] * 3,
                 [[1048576, 4096, 1], [4096, 1], [1]])
    f = gemm_fields(linear)
    assert f is not None and (f["m"], f["n"], f["k"], f["layout"]) == (2048, 16384, 4096, "nt")
