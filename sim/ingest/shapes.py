"""Shapes of an imported kernel from the CPU op that launched it (`Input Dims`, `Input type`).

`infer_op(family, stack, activity)` returns the workload op fields (kind and its sizes)
plus the tensors it reads and writes, or None when the shapes cannot be told (no
`record_shapes`, a Triton kernel, an op no rule knows). None means the kernel keeps its
measured duration and is counted as unpriced — never a silent zero.

The rules are the op kinds' (sim/ops/: `add_shape_rule`, `add_activity_rule`); this module
holds what they share (input tensors, streaming ops' fields, tensor declarations). The stack
is the chain of CPU ops enclosing the launch (outermost first); the innermost op that a rule
of the kernel's family claims wins (with its fields, or UNKNOWN: claimed, shapes unknown).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sim.ingest.kineto import CpuOp, GpuActivity

# PyTorch's `Input type` strings → kernelsim dtypes.
TORCH_DTYPES = {
    "float": "fp32", "double": "fp64", "c10::half": "fp16", "c10::bfloat16": "bf16", "long int": "int64",
    "int": "int32", "bool": "bool", "unsigned char": "uint8", "signed char": "int8", "c10::float8_e4m3fn": "fp8",
    "c10::float8_e5m2": "fp8", "c10::float8_e4m3fnuz": "fp8", "c10::float8_e5m2fnuz": "fp8", "short int": "int32",
}



@dataclass
class Inferred:
    fields: dict[str, Any]  # kind and its size fields, as in a workload file
    tensors: dict[str, dict[str, Any]] = field(default_factory=dict)  # name → {shape, dtype}
    reads: list[str] = field(default_factory=list)
    writes: list[str] = field(default_factory=list)


def short_name(name: str) -> str:
    base = name.split("::")[-1]
    return base[:-1] if base.endswith("_") and base not in ("copy_", "fill_", "zero_", "index_put_") else base


def _dtype(t: Any) -> str | None:
    return TORCH_DTYPES.get(str(t).lower()) if isinstance(t, str) else None


def input_tensors(op: CpuOp) -> list[tuple[tuple[int, ...], str]]:
    """The op's tensor inputs with a known dtype, in order: (shape, dtype); scalars have shape ()."""
    dims, types = op.input_dims or [], op.input_types or []
    out = []
    for j, d in enumerate(dims):
        dt = _dtype(types[j]) if j < len(types) else None
        if dt is None or not isinstance(d, list) or not all(isinstance(x, int) and x >= 0 for x in d):
            continue
        out.append((tuple(d), dt))
    return out


def numel(shape: tuple[int, ...]) -> int:
    n = 1
    for x in shape:
        n *= x
    return n


def _broadcast(shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    rank = max(len(s) for s in shapes)
    out = [1] * rank
    for s in shapes:
        for k, x in enumerate(s):
            pos = rank - len(s) + k
            out[pos] = max(out[pos], x)
    return tuple(out)


def declare(inf: Inferred, prefix: str, role: str, shape: tuple[int, ...], dtype: str) -> str | None:
    if not shape or numel(shape) == 0:
        return None
    name = f"{prefix}.{role}{len(inf.tensors)}"
    inf.tensors[name] = {"shape": list(shape), "dtype": dtype}
    (inf.writes if role == "out" else inf.reads).append(name)
    return name


def attention_backend(kernel_name: str, op_name: str = "") -> str | None:
    """The fused-attention library a trace's kernel (or, failing that, its aten op) shows: cuDNN's
    generated SDPA kernels (cudnn_generated_fort_native_sdpa_*, cudnn::fusion::*) or PyTorch's
    flash kernels (flash_fwd_*, flash_bwd_*); None when neither name tells."""
    low = kernel_name.lower()
    if "cudnn" in low:
        return "cudnn"
    if "flash" in low:
        return "flash"
    if "cudnn" in op_name:
        return "cudnn"
    if "flash" in op_name:
        return "flash"
    return None


def streaming_fields(op: CpuOp, kind: str, prefix: str, math: dict[str, float]) -> Inferred | None:
    ts = input_tensors(op)
    shapes = [s for s, _ in ts if s]
    if not shapes:
        return None
    inf = Inferred({"kind": kind})
    for s, dt in ts:
        declare(inf, prefix, "in", s, dt)
    big = max(ts, key=lambda t: numel(t[0]))
    if kind == "reduction":
        first = ts[0][0] if ts[0][0] else big[0]
        reduced = _reduced_dims(op, len(first))
        if reduced is None:  # normalizations and scans: the output has the input's shape
            cols = first[-1]
            rows = max(1, numel(first) // max(1, cols))
            inf.fields.update({"rows": rows, "cols": cols})
            declare(inf, prefix, "out", first, ts[0][1])
        else:
            dims, keepdim = reduced
            inner = numel(tuple(first[d] for d in dims))
            outer = max(1, numel(first) // max(1, inner))
            if len(dims) == len(first):
                # NB: a full reduction runs many blocks, each over a slice, like a row-wise one over the last dim.
                inf.fields.update({"rows": max(1, numel(first) // max(1, first[-1])), "cols": first[-1]})
            elif dims == list(range(len(dims))):
                # Leading dims reduced (a bias gradient's sum(dim=0)): column sums.
                inf.fields.update({"rows": inner, "cols": outer, "axis": "rows"})
            else:
                # NB: reduced dims that are not leading are priced as a row-wise reduction over them.
                inf.fields.update({"rows": outer, "cols": inner})
            out = tuple(1 if d in dims else x for d, x in enumerate(first)) if keepdim else \
                tuple(x for d, x in enumerate(first) if d not in dims)
            declare(inf, prefix, "out", out or (1,), ts[0][1])
    else:
        out = _broadcast(shapes)
        declare(inf, prefix, "out", out, big[1])
    if math:
        inf.fields["math"] = dict(math)
    return inf


# Reductions whose output drops the reduced dims: op → (index of `dim`, index of `keepdim`) in its arguments.
REDUCED_DIM_ARGS = {"sum": (1, 2), "mean": (1, 2), "amax": (1, 2), "amin": (1, 2), "max": (1, 2), "min": (1, 2),
                    "argmax": (1, 2), "argmin": (1, 2), "norm": (2, 3)}


def _reduced_dims(op: CpuOp, rank: int) -> tuple[list[int], bool] | None:
    """The dims a reducing op removes (sorted, non-negative) and its keepdim, from `Concrete Inputs`;
    None for ops whose output keeps the input's shape (softmax, norms, scans)."""
    at = REDUCED_DIM_ARGS.get(short_name(op.name))
    if at is None:
        return None
    dim_at, keep_at = at
    concrete = op.concrete or []
    raw = str(concrete[dim_at]).strip() if 0 <= dim_at < len(concrete) else ""
    keepdim = 0 <= keep_at < len(concrete) and str(concrete[keep_at]).strip().lower() == "true"
    dims: list[int] = []
    for part in raw.strip("[]()").split(","):
        part = part.strip()
        if not part:
            continue
        try:
            d = int(part)
        except ValueError:
            return None
        if not -rank <= d < rank:
            return None
        dims.append(d % rank)
    if not dims:  # no dim: every dim is reduced (a full sum, a loss)
        dims = list(range(rank))
    return sorted(set(dims)), keepdim


class ShapeUnknown:
    """A shape rule's answer "this op is mine, but its shapes cannot be told" (`UNKNOWN`): the search stops
    there and the kernel keeps its measured time (unpriced), where `None` ("not mine") lets the next
    rule, and then the next enclosing CPU op, try."""

    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN = ShapeUnknown()

# (CPU op, tensor-name prefix, kernel name) → the op's workload fields, UNKNOWN, or None (not this rule's op)
ShapeRule = Callable[[CpuOp, str, str], "Inferred | ShapeUnknown | None"]
# (GPU activity) → its workload fields, UNKNOWN, or None: tried before the CPU ops (a memcpy says its own bytes)
ActivityRule = Callable[[GpuActivity], "Inferred | ShapeUnknown | None"]
_SHAPE_RULES: list[tuple[str, ShapeRule]] = []  # (family, rule), from the op kinds (sim/ops/), in definition order
_ACTIVITY_RULES: list[ActivityRule] = []


def add_shape_rule(family: str, rule: ShapeRule) -> None:
    """For a kernel of `family`, try `rule(cpu_op, prefix, kernel_name)` on each enclosing CPU op (innermost
    first; the rules of one family in the order they were added): the workload fields it returns, UNKNOWN
    when the op is its own but its shapes cannot be told, or None when the op is not its own."""
    _SHAPE_RULES.append((family, rule))


def add_activity_rule(rule: ActivityRule) -> None:
    """Try `rule(activity)` on every GPU activity before its CPU ops (e.g. a memcpy whose trace event says
    its bytes): fields, UNKNOWN or None, as a shape rule answers."""
    _ACTIVITY_RULES.append(rule)


def infer_op(family: str, stack: list[CpuOp], act: GpuActivity, prefix: str) -> Inferred | None:
    """Workload fields for one GPU activity, or None when its shapes are unknown."""
    for activity_rule in _ACTIVITY_RULES:
        found = activity_rule(act)
        if found is not None:
            return found if isinstance(found, Inferred) else None
    rules = [rule for rule_family, rule in _SHAPE_RULES if rule_family == family]
    for op in reversed(stack):
        for rule in rules:
            inferred = rule(op, prefix, act.name)
            if inferred is not None:
                return inferred if isinstance(inferred, Inferred) else None
    return None
