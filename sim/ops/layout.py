"""Op kind layout (a plugin, sim/ops/): a layout-conversion kernel (transpose, contiguous, NCHW <-> NHWC,
cast), which a fallback path or a re-layout may add.

The cost function is the cost model's (`sim.costmodel.layout.layout_cost`: a streaming kernel, a
transposing one at the profile's `layout_bandwidth_factor` of a copy's bandwidth); this file lists the
kind in every layer: its workload keys, the kernel names an imported trace shows for it, and the shapes
of its framework ops.
"""

from __future__ import annotations

from typing import Literal

from sim.costmodel.layout import layout_cost
from sim.ingest.kineto import CpuOp
from sim.ingest.shapes import Inferred, short_name, streaming_fields
from sim.ops import OpKind, define
from sim.schema.workload import OpBase


class LayoutOp(OpBase):
    kind: Literal["layout"]
    transform: Literal["transpose", "contiguous", "nchw_to_nhwc", "nhwc_to_nchw", "cast"]


LAYOUT_OPS = ("transpose", "permute", "contiguous", "clone", "copy_", "_to_copy")


def layout_shapes(op: CpuOp, prefix: str, kernel_name: str) -> Inferred | None:
    """A layout kernel under one of LAYOUT_OPS: it streams the op's tensors once (read and written), priced as
    a transpose; None for any other op."""
    if short_name(op.name) not in LAYOUT_OPS:
        return None
    inf = streaming_fields(op, "layout", prefix, {})
    if inf is not None:
        inf.fields = {"kind": "layout", "transform": "transpose"}
    return inf


define(OpKind(
    spec=LayoutOp,
    cost=layout_cost,
    examples={"layout": "{name: to_nhwc, kind: layout, transform: nchw_to_nhwc, reads: [x], writes: [x_nhwc]}"},
    family=("layout", r"transpose|permute|nchw|nhwc|im2col|col2im"),
    shape_rule=layout_shapes,
    family_after="copy",  # after the collective, Triton, attention and copy rules
))
