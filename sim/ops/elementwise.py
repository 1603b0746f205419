"""Op kind elementwise (a plugin, sim/ops/): a streaming kernel that reads and writes each element once and
does named math per element (GELU's erf, dropout's Philox, an optimizer's FMAs).

The cost function is the cost model's (`sim.costmodel.elementwise.elementwise_cost`: HBM streaming
at the achieved bandwidth for the bytes in flight, the math on its units, occupancy and spills);
this file lists the kind in every layer: its workload keys, the kernel names an imported trace shows
for it, and the shapes of its framework ops.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from sim.costmodel.elementwise import elementwise_cost
from sim.ingest.kineto import CpuOp
from sim.ingest.shapes import (
    UNKNOWN,
    Inferred,
    ShapeUnknown,
    declare,
    input_tensors,
    numel,
    short_name,
    streaming_fields,
)
from sim.ops import OpKind, define
from sim.schema.workload import Expr, OpBase


class ElementwiseOp(OpBase):
    kind: Literal["elementwise"]
    numel: Expr | None = None
    math: dict[str, Expr] = Field(default_factory=dict, description="named ops per element (erf, rng, fma...)")


# Elementwise math per element, in the hardware profile's `op_costs` names (estimates).
ELEMENTWISE_MATH: dict[str, dict[str, float]] = {
    "add": {"add": 1}, "sub": {"add": 1}, "rsub": {"add": 1}, "mul": {"mul": 1}, "div": {"div": 1},
    "gelu": {"gelu": 1}, "gelu_backward": {"gelu_backward": 1}, "relu": {"select": 1},
    "threshold_backward": {"select": 1}, "native_dropout": {"rng": 1, "mul": 1, "select": 1},
    "native_dropout_backward": {"mul": 1}, "dropout": {"rng": 1, "mul": 1, "select": 1},
    "tanh": {"tanh": 1}, "exp": {"exp": 1}, "sigmoid": {"sigmoid": 1}, "silu": {"silu": 1},
    "silu_backward": {"exp": 1, "div": 1, "mul": 3}, "rsqrt": {"rsqrt": 1}, "sqrt": {"sqrt": 1},
    "sin": {"sin": 1}, "cos": {"cos": 1}, "tan": {"tan": 1}, "atan": {"atan": 1}, "log": {"log": 1},
    "log2": {"log2": 1}, "log1p": {"log1p": 1}, "exp2": {"exp2": 1}, "expm1": {"expm1": 1},
    "reciprocal": {"reciprocal": 1}, "softplus": {"softplus": 1}, "erfinv": {"erfinv": 1}, "abs": {"abs": 1},
    "clamp": {"minmax": 2}, "clamp_min": {"minmax": 1}, "clamp_max": {"minmax": 1}, "maximum": {"minmax": 1},
    "minimum": {"minmax": 1}, "sigmoid_backward": {"fma": 2},
    "addcmul": {"fma": 1}, "addcdiv": {"div": 1, "add": 1}, "lerp": {"fma": 2}, "fill": {}, "zero": {},
    "fill_": {}, "zero_": {}, "where": {"select": 1}, "masked_fill": {"select": 1}, "neg": {"mul": 1}, "pow": {"pow": 1},
    "_foreach_add": {"add": 1}, "_foreach_mul": {"mul": 1}, "embedding": {}, "index_select": {},
}

# PyTorch's pow(tensor, scalar) turns these exponents into cheaper math (pow_tensor_scalar_optimized_kernel).
POW_SPECIAL: dict[float, dict[str, float]] = {
    2.0: {"mul": 1}, 3.0: {"mul": 2}, 0.5: {"sqrt": 1}, -0.5: {"rsqrt": 1}, -1.0: {"reciprocal": 1},
    -2.0: {"mul": 1, "reciprocal": 1}, 1.0: {},
}


def pow_math(op: CpuOp) -> dict[str, float]:
    concrete = op.concrete or []
    try:
        exponent = float(str(concrete[1]).strip()) if len(concrete) > 1 else None
    except ValueError:
        exponent = None
    return POW_SPECIAL.get(exponent, ELEMENTWISE_MATH["pow"]) if exponent is not None else ELEMENTWISE_MATH["pow"]


def gather_shapes(op: CpuOp, prefix: str) -> Inferred | None:
    """index_select(table, dim, index) / embedding(table, index): the kernel reads only the rows it
    gathers (and the indices) and writes them; the table's other rows are never touched."""
    ts = input_tensors(op)
    tables = [t for t in ts if t[1] not in ("int64", "int32") and len(t[0]) >= 1]
    index = [t for t in ts if t[1] in ("int64", "int32")]
    if not tables or not index:
        return None
    (table, dt), (idx, idt) = tables[0], index[0]
    row = numel(table[1:]) if len(table) > 1 else 1
    out = (max(1, numel(idx)), row)
    inf = Inferred({"kind": "elementwise"})
    declare(inf, prefix, "in", out, dt)  # the gathered rows
    declare(inf, prefix, "in", idx if idx else (1,), idt)
    declare(inf, prefix, "out", out, dt)
    return inf


def elementwise_shapes(op: CpuOp, prefix: str, kernel_name: str) -> Inferred | ShapeUnknown | None:
    """A gather (index_select, embedding) or a framework op of ELEMENTWISE_MATH: its tensors and math;
    UNKNOWN when it is one of those but its inputs say no shapes; None for any other op."""
    short = short_name(op.name)
    if short in ("index_select", "embedding"):
        found = gather_shapes(op, prefix)
    elif short in ELEMENTWISE_MATH:
        found = streaming_fields(op, "elementwise", prefix, pow_math(op) if short == "pow" else ELEMENTWISE_MATH[short])
    else:
        return None
    return found if found is not None else UNKNOWN


define(OpKind(
    spec=ElementwiseOp,
    cost=elementwise_cost,
    examples={"elementwise": "{name: gelu, kind: elementwise, reads: [h], writes: [g], math: {gelu: 1}}"},
    family=("elementwise", r"elementwise|vectorized|unrolled|pointwise|fused_dropout|dropout|gelu|relu|silu|"
                           r"activation|binary|unary|addcmul|adam|sgd|foreach|multi_tensor_apply|index|scatter|gather"),
    shape_rule=elementwise_shapes,
    family_after="gemm",  # the broadest rule, tried last (the reduction rule goes in between: sim/ops/reduction.py)
))
