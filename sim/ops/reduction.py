"""Op kind reduction (a plugin, sim/ops/): a row-wise reduction (softmax, layer norm, a loss) or column sums
(a bias gradient), in one or more passes over its input.

The cost function is the cost model's (`sim.costmodel.reduction.reduction_cost`: ATen's reduce launch,
threads per row, the column-sum split, the per-step latency of the tree); this file lists the kind in
every layer: its workload keys, the kernel names an imported trace shows for it, and the shapes of its
framework ops.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field

from sim.costmodel.reduction import reduction_cost
from sim.ingest.kineto import CpuOp
from sim.ingest.shapes import (
    UNKNOWN,
    Inferred,
    ShapeUnknown,
    declare,
    input_tensors,
    short_name,
    streaming_fields,
)
from sim.ops import OpKind, define
from sim.schema.workload import Expr, OpBase


class ReductionOp(OpBase):
    kind: Literal["reduction"]
    rows: Expr
    cols: Expr
    axis: Literal["cols", "rows"] = Field(default="cols", description="the axis reduced: cols (row-wise, e.g. layer norm) or rows (column sums, e.g. bias gradients)")
    passes: Expr = 1
    math: dict[str, Expr] = Field(default_factory=dict)
    impl: Literal["torch_softmax", "torch_softmax_bwd", "torch_layer_norm", "torch_rms_norm", "torch_layer_norm_bwd",
                  "torch_gamma_beta", "torch_rms_norm_bwd", "torch_rms_gamma"] | None = Field(
        default=None,
        description="torch_softmax: PyTorch's softmax forward over the last dimension -- priced as the kernel ATen picks "
                    "for the row length (warp, register, shared-memory or three-sweep kernel: the profile's "
                    "softmax_kernel), whatever `passes` says; torch_softmax_bwd: the kernel of its backward "
                    "(warp, shared-memory or two-sweep kernel, the profile's softmax_kernel bwd_* keys), reading "
                    "the product grad * output (ATen's elementwise kernel before it: an op of its own) and the "
                    "output; torch_layer_norm / torch_rms_norm: PyTorch's layer "
                    "norm / RMS norm forward -- ATen's vectorized kernel, a block per row (the profile's "
                    "layer_norm_kernel; a layer norm over rows that are not whole 4-element vectors: ATen's "
                    "two-kernel fallback, its fb_* keys); "
                    "torch_layer_norm_bwd / torch_gamma_beta: the layer norm backward's grad-input kernel (a block "
                    "per row) and its gamma/beta column sums (an op over axis: rows), ATen's kernels (the profile's "
                    "layer_norm_kernel bwd_* / gb_* keys); torch_rms_norm_bwd / torch_rms_gamma: the same two "
                    "kernels of RMS norm's backward (its gamma sums alone; the rms_bwd_* / rms_gb_* keys). "
                    "import-trace sets torch_softmax, torch_softmax_bwd, torch_layer_norm and torch_rms_norm from "
                    "the kernel's name")


REDUCTION_MATH: dict[str, dict[str, float]] = {
    "sum": {"add": 1}, "mean": {"add": 1}, "amax": {"select": 1}, "max": {"select": 1}, "min": {"select": 1},
    "norm": {"fma": 1}, "_softmax": {"exp": 1, "add": 1, "div": 1}, "softmax": {"exp": 1, "add": 1, "div": 1},
    "_log_softmax": {"exp": 1, "add": 2}, "_softmax_backward_data": {"fma": 2},
    "_log_softmax_backward_data": {"exp": 1, "fma": 1}, "native_layer_norm": {"add": 3, "mul": 3, "rsqrt": 1},
    "layer_norm": {"add": 3, "mul": 3, "rsqrt": 1}, "native_layer_norm_backward": {"fma": 6},
    "_fused_rms_norm": {"fma": 2, "rsqrt": 1}, "rms_norm": {"fma": 2, "rsqrt": 1},
    "nll_loss_forward": {"add": 1}, "nll_loss_backward": {}, "argmax": {"select": 1}, "cumsum": {"add": 1},
}


# ATen's softmax forward kernels over the last dimension (SoftMax.cu host_softmax, PersistentSoftmax.cuh); log-softmax
# runs the same kernels with another epilogue and is not marked
ATEN_SOFTMAX_KERNEL = re.compile(r"softmax_warp_forward|cunn_SoftMaxForward(Reg|Smem)?\b|cunn_SoftMaxForward<")
# ATen's softmax backward kernels over the last dimension (host_softmax_backward); log-softmax's are not marked
ATEN_SOFTMAX_BWD_KERNEL = re.compile(r"softmax_warp_backward|cunn_SoftMaxBackward(Smem)?\b|cunn_SoftMaxBackward<")
# ATen's vectorized layer-norm forward (layer_norm_kernel.cu: vectorized_layer_norm_kernel<T, T_ACC, rms_norm>);
# RMS norm runs it with its rms flag (true): no Welford updates, its own times (profile layer_norm_kernel rms_*)
ATEN_LAYER_NORM_KERNEL = re.compile(r"vectorized_layer_norm_kernel<[^>]*,\s*(false|true)>")
LAYER_NORM_OPS = {"native_layer_norm": "false", "layer_norm": "false", "_fused_rms_norm": "true", "rms_norm": "true"}


def nll_shapes(op: CpuOp, prefix: str, backward: bool) -> Inferred | None:
    """nll_loss forward/backward on [N, C] log-probabilities: one value per row is read (forward,
    summed) or written (backward, into a gradient zeroed by a separate fill), never the whole input."""
    ts = input_tensors(op)
    probs = [t for t in ts if t[1] not in ("int64", "int32") and len(t[0]) == 2]
    if not probs:
        return None
    (shape, dt) = probs[0]
    n = shape[0]
    inf = Inferred({"kind": "elementwise"} if backward else {"kind": "reduction", "rows": 1, "cols": n,
                                                              "math": {"add": 1}})
    declare(inf, prefix, "in", (n,), dt)
    declare(inf, prefix, "in", (n,), "int64")
    declare(inf, prefix, "out", (n,) if backward else (1,), dt)
    return inf


def reduction_shapes(op: CpuOp, prefix: str, kernel_name: str) -> Inferred | ShapeUnknown | None:
    """nll_loss or a framework op of REDUCTION_MATH: its rows, columns, tensors and math; UNKNOWN when it
    is one of those but its inputs say no shapes; None for any other op."""
    short = short_name(op.name)
    if short in ("nll_loss_forward", "nll_loss_backward"):
        found = nll_shapes(op, prefix, short == "nll_loss_backward")
    elif short in REDUCTION_MATH:
        found = streaming_fields(op, "reduction", prefix, REDUCTION_MATH[short])
        if found is not None and short in ("_softmax", "softmax") and ATEN_SOFTMAX_KERNEL.search(kernel_name):
            found.fields["impl"] = "torch_softmax"  # one of host_softmax's last-dimension kernels ran
        if (found is not None and short == "_softmax_backward_data" and ATEN_SOFTMAX_BWD_KERNEL.search(kernel_name)
                and "LogSoftMax" not in kernel_name):
            found.fields["impl"] = "torch_softmax_bwd"  # one of host_softmax_backward's last-dimension kernels ran
        ln = ATEN_LAYER_NORM_KERNEL.search(kernel_name)
        if found is not None and ln is not None and LAYER_NORM_OPS.get(short) == ln.group(1):
            # the vectorized forward ran (not the two-kernel fallback), with the flag of the op's kind
            found.fields["impl"] = "torch_rms_norm" if ln.group(1) == "true" else "torch_layer_norm"
    else:
        return None
    return found if found is not None else UNKNOWN


define(OpKind(
    spec=ReductionOp,
    cost=reduction_cost,
    examples={"reduction": "{name: bias_grad, kind: reduction, rows: tokens, cols: ffn, axis: rows, reads: [dg], "
                           "writes: [db], phase: backward}"},
    family=("reduction", r"reduce|layer_norm|gammabetabackward|layernorm|rms_?norm|softmax|batch_norm|group_norm|"
                         r"norm_kernel|cross_entropy|nll_loss|argmax|argmin|cumsum|scan|topk|sort"),
    shape_rule=reduction_shapes,
    family_after="gemm",  # after the GEMM rule, before the elementwise one (a softmax kernel is vectorized too)
))
