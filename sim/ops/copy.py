"""Op kind copy (a plugin, sim/ops/): a device copy on the SMs (a copy kernel, the driver's memcpy kernel) or
on the copy engines (host <-> device, or device to device beside running kernels).

The cost function is the cost model's (`sim.costmodel.layout.copy_cost`: streaming bandwidth, the
driver's memcpy launch, PCIe for host copies, a clean or dirty L2); this file lists the kind in every
layer: its workload keys, the kernel names an imported trace shows for it, and the shapes of its
framework ops and of the trace's own memcpy/memset events.
"""

from __future__ import annotations

from typing import Literal

from sim.costmodel.layout import copy_cost
from sim.graph import DTYPE_BYTES
from sim.ingest.kineto import CpuOp, GpuActivity
from sim.ingest.shapes import UNKNOWN, Inferred, ShapeUnknown, numel, short_name, streaming_fields
from sim.ops import OpKind, define
from sim.schema.workload import Expr, OpBase


class CopyOp(OpBase):
    kind: Literal["copy"]
    bytes: Expr | None = None
    engine: Literal["sm", "copy_engine"] = "sm"
    direction: Literal["d2d", "h2d", "d2h"] = "d2d"


COPY_OPS = {"copy_", "index_copy", "index_copy_", "_to_copy", "to", "clone", "contiguous", "_copy_from", "copy",
            "index_put_", "cat", "fill_", "zero_", "zeros", "zeros_like", "ones", "full", "empty_like", "new_zeros",
            "embedding"}


def memcpy_shapes(act: GpuActivity) -> Inferred | ShapeUnknown | None:
    """A trace's memcpy or memset event: its bytes (a device-to-device memcpy reads and writes them) and
    engine; UNKNOWN when the event records no bytes; None for a kernel."""
    if act.cat not in ("gpu_memcpy", "gpu_memset"):
        return None
    name = act.name.lower()
    direction = "h2d" if "htod" in name else "d2h" if "dtoh" in name else "d2d"
    if act.bytes is None:
        return UNKNOWN
    nbytes = act.bytes
    if act.cat == "gpu_memcpy" and direction == "d2d":
        nbytes *= 2  # read and write
    engine = "copy_engine" if act.cat == "gpu_memcpy" else "sm"
    return Inferred({"kind": "copy", "bytes": nbytes, "engine": engine, "direction": direction})


def copy_shapes(op: CpuOp, prefix: str, kernel_name: str) -> Inferred | ShapeUnknown | None:
    """A copy kernel under a framework op of COPY_OPS: the bytes of the tensors it reads and writes; UNKNOWN
    when it is one of those but its inputs say no shapes; None for any other op."""
    short = short_name(op.name)
    if short not in COPY_OPS and op.name.split("::")[-1] not in COPY_OPS:
        return None
    inf = streaming_fields(op, "elementwise", prefix, {})
    if inf is None:
        return UNKNOWN
    sizes = [numel(tuple(t["shape"])) * DTYPE_BYTES[t["dtype"]] for t in inf.tensors.values()]
    if short.startswith(("index_copy", "index_put")):
        # NB: the destination (first input) is touched only where the source lands.
        sizes = [2 * sizes[-2]] if len(sizes) >= 2 else sizes
    nbytes = sum(sizes)
    return Inferred({"kind": "copy", "bytes": nbytes, "engine": "sm", "direction": "d2d"})


define(OpKind(
    spec=CopyOp,
    cost=copy_cost,
    examples={"copy": "{name: h2d, kind: copy, bytes: 4 * tokens * hidden, engine: copy_engine, direction: h2d}"},
    family=("copy", r"^memcpy|^memset|copy_kernel|copy_device_to_device|\bcopy\b|fill_kernel|zero_kernel|cat_array"),
    shape_rule=copy_shapes,
    activity_rule=memcpy_shapes,
    family_after="attention",  # after the collective, Triton and attention rules
))
