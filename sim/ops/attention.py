"""Op kind attention (a plugin, sim/ops/): fused scaled-dot-product attention (FlashAttention, cuDNN's SDPA),
forward or backward, causal or not, and decode over a KV cache.

The cost function is the cost model's (`sim.costmodel.attention.attention_cost`: tiles, the causal
share, each backend's measured efficiency, split-KV decode); this file lists the kind in every layer:
its workload keys, the kernel names an imported trace shows for it, and the shapes of its framework ops.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from sim.costmodel.attention import attention_cost
from sim.ingest.kineto import CpuOp
from sim.ingest.shapes import Inferred, attention_backend, input_tensors
from sim.ops import OpKind, define
from sim.schema.workload import DType, Expr, OpBase


class AttentionOp(OpBase):
    kind: Literal["attention"]
    batch: Expr
    heads: Expr
    seq_q: Expr
    seq_kv: Expr
    head_dim: Expr
    causal: bool = False
    direction: Literal["forward", "backward"] = "forward"
    dtype: DType = "bf16"
    backend: str | None = Field(
        default=None, description="fused-attention library (flash, cudnn, ...); default: the profile's SDPA choice")


ATTENTION_OPS = {  # op → (index of is_causal in its arguments, direction)
    "aten::_scaled_dot_product_flash_attention": (4, "forward"),
    "aten::_scaled_dot_product_efficient_attention": (5, "forward"),
    "aten::_scaled_dot_product_cudnn_attention": (6, "forward"),
    "aten::_flash_attention_forward": (6, "forward"),
    "aten::_efficient_attention_forward": (7, "forward"),
    "aten::_scaled_dot_product_flash_attention_backward": (11, "backward"),
    "aten::_scaled_dot_product_efficient_attention_backward": (8, "backward"),
    "aten::_scaled_dot_product_cudnn_attention_backward": (14, "backward"),
    "aten::_flash_attention_backward": (10, "backward"),
    "aten::_efficient_attention_backward": (11, "backward"),
}


def attention_shapes(op: CpuOp, prefix: str, kernel_name: str) -> Inferred | None:
    """An SDPA framework op's (batch, heads, seq_q, seq_kv, head_dim) from its 4-D inputs, `is_causal` from its
    Concrete Inputs and the backend from the kernel's name; None for any other op."""
    if op.name not in ATTENTION_OPS:
        return None
    causal_at, direction = ATTENTION_OPS[op.name]
    ts = [t for t in input_tensors(op) if len(t[0]) == 4]
    if direction == "backward":
        ts = ts[1:]  # grad_out first
    if len(ts) < 3:
        return None
    (q, dt), (k, _) = ts[0], ts[1]
    causal = False
    if op.concrete and causal_at < len(op.concrete):
        causal = str(op.concrete[causal_at]).strip().lower() == "true"
    out: dict[str, Any] = {
        "kind": "attention", "batch": q[0], "heads": q[1], "seq_q": q[2], "seq_kv": k[2], "head_dim": q[3],
        "causal": causal, "direction": direction, "dtype": dt if dt in ("bf16", "fp16", "fp8", "fp32") else "bf16"}
    # the library that ran, as the kernel's name shows: the profile prices each backend by its own
    # fit (efficiency.attention_backends), whatever the profile's default for a workload's SDPA.
    backend = attention_backend(kernel_name, op.name)
    if backend is not None:
        out["backend"] = backend
    return Inferred(out)


define(OpKind(
    spec=AttentionOp,
    cost=attention_cost,
    examples={"attention": "{name: attn, kind: attention, batch: 1, heads: 32, seq_q: seq, seq_kv: seq, "
                           "head_dim: 128, causal: true, reads: [q, k, v], writes: [o]}"},
    family=("attention", r"flash|fmha|attention|attn|sdpa|mha_|_mha|cudnn_.*(mha|sdpa)|"
                         r"cudnn::fusion::(compute_dot_do_o|convert_dq)"),
    shape_rule=attention_shapes,
    family_after="triton",  # an NCCL or Triton kernel that says attn is not one
))
