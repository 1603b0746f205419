"""Op kind gemm (a plugin, sim/ops/): a matrix multiply on tensor cores (or the FP32 pipes), cuBLAS-style.

The cost function is the cost model's (`sim.costmodel.gemm.gemm_cost`: tile and wave quantization,
K-depth efficiency, alignment, the measured correction table); this file lists the kind in every
layer: its workload keys, the kernel names an imported trace shows for it, and the shapes of its
framework ops.
"""

from __future__ import annotations

from typing import Any, Literal

from sim.costmodel.gemm import gemm_cost
from sim.ingest.kineto import CpuOp
from sim.ingest.shapes import Inferred, input_tensors, numel
from sim.ops import OpKind, define
from sim.schema.workload import DType, Expr, OpBase


class GemmOp(OpBase):
    kind: Literal["gemm"]
    m: Expr
    n: Expr
    k: Expr
    batch: Expr = 1
    dtype: DType = "bf16"
    layout: Literal["nn", "nt", "tn", "tt"] = "nn"


GEMM_OPS = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::_scaled_mm", "aten::addmv", "aten::mv",
            "aten::linear", "aten::_addmm_activation"}


def _column_major(op: CpuOp, position: int) -> bool:
    """Whether the op's input at `position` (in the trace's input list) is a transposed matrix: its last two
    dimensions' strides are (1, >1), so its rows are the other dimension (the trace's `Input Strides`)."""
    dims, strides = op.input_dims or [], op.input_strides or []
    if position >= len(dims) or position >= len(strides):
        return False
    d, s = dims[position], strides[position]
    if not (isinstance(d, list) and isinstance(s, list) and len(d) >= 2 and len(s) == len(d)):
        return False
    return s[-2] == 1 and s[-1] != 1 and d[-2] > 1


def _layout(op: CpuOp, a_pos: int, b_pos: int, b_transposed_when_row_major: bool = False) -> str:
    """'nn' / 'nt' / 'tn' / 'tt' from the strides of A and B (which leading dimensions must align)."""
    b_t = _column_major(op, b_pos) != b_transposed_when_row_major
    return ("t" if _column_major(op, a_pos) else "n") + ("t" if b_t else "n")


def gemm_fields(op: CpuOp) -> dict[str, Any] | None:
    """(m, n, k, batch, dtype, layout) of a matmul framework op from its inputs; None when they cannot be read.
    The layout comes from the recorded strides (a weight gradient reads a transposed activation), else 'nn'."""
    # NB: positions index the trace's input list, scalars included; input_tensors keeps the tensors with a dtype
    ts = [t for t in input_tensors(op) if t[0]]
    short = op.name
    try:
        if short in ("aten::mm", "aten::_scaled_mm"):
            (a, dt), (b, _) = ts[0], ts[1]
            m, k, n, batch = a[0], a[1], b[1], 1
            layout = _layout(op, 0, 1)
        elif short in ("aten::addmm", "aten::_addmm_activation"):
            (a, dt), (b, _) = ts[1], ts[2]
            m, k, n, batch = a[0], a[1], b[1], 1
            layout = _layout(op, 1, 2)
        elif short == "aten::bmm":
            (a, dt), (b, _) = ts[0], ts[1]
            batch, m, k, n = a[0], a[1], a[2], b[2]
            layout = _layout(op, 0, 1)
        elif short == "aten::baddbmm":
            (a, dt), (b, _) = ts[1], ts[2]
            batch, m, k, n = a[0], a[1], a[2], b[2]
            layout = _layout(op, 1, 2)
        elif short in ("aten::addmv", "aten::mv"):
            (a, dt) = ts[1] if short == "aten::addmv" else ts[0]
            m, k, n, batch = a[0], a[1], 1, 1
            layout = "nn"
        elif short == "aten::linear":
            (x, dt), (w, _) = ts[0], ts[1]
            m, k, n, batch = numel(x[:-1]), x[-1], w[0], 1
            layout = _layout(op, 0, 1, b_transposed_when_row_major=True)  # x @ w.T: a row-major weight is B transposed
        else:
            return None
    except (IndexError, ValueError):
        return None
    if min(m, n, k, batch) < 1 or len(a if short != "aten::linear" else x) < 1:
        return None
    if short == "aten::_scaled_mm":
        dt = "fp8"
    if dt not in ("fp32", "tf32", "bf16", "fp16", "fp8", "int8"):
        return None
    fields: dict[str, Any] = {"kind": "gemm", "m": m, "n": n, "k": k, "batch": batch, "dtype": dt}
    if layout != "nn":
        fields["layout"] = layout
    return fields


def gemm_shapes(op: CpuOp, prefix: str, kernel_name: str) -> Inferred | None:
    """A matmul framework op (GEMM_OPS) whose inputs give its sizes; None otherwise (an enclosing op may)."""
    if op.name not in GEMM_OPS:
        return None
    fields = gemm_fields(op)
    return Inferred(fields) if fields is not None else None


define(OpKind(
    spec=GemmOp,
    cost=gemm_cost,
    examples={"gemm": "{name: fc1, kind: gemm, m: tokens, n: ffn, k: hidden, reads: [x, w1], writes: [h]}"},
    family=("gemm", r"gemm|cutlass|cublas|nvjet|xmma|sm\d+_xmma|\bmma\b|matmul|gemv|dot_kernel|splitkreduce|s\d+gemm|"
                    r"wgrad|dgrad"),
    shape_rule=gemm_shapes,
    family_after="triton",  # an NCCL or Triton kernel that says gemm is not one
))
