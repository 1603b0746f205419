"""Shapes of an imported kernel from the CPU op that launched it (`Input Dims`, `Input type`).

`infer_op(family, stack, activity)` returns the workload op fields (kind and its sizes)
plus the tensors it reads and writes, or None when the shapes cannot be told (no
`record_shapes`, a Triton kernel, an op this module does not know). None means the
kernel keeps its measured duration and is counted as unpriced — never a silent zero.

The stack is the chain of CPU ops enclosing the launch (outermost first); the innermost
op that this module recognises for the kernel's family wins.
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

GEMM_OPS = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::_scaled_mm", "aten::addmv", "aten::mv",
            "aten::linear", "aten::_addmm_activation"}
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
REDUCTION_MATH: dict[str, dict[str, float]] = {
    "sum": {"add": 1}, "mean": {"add": 1}, "amax": {"select": 1}, "max": {"select": 1}, "min": {"select": 1},
    "norm": {"fma": 1}, "_softmax": {"exp": 1, "add": 1, "div": 1}, "softmax": {"exp": 1, "add": 1, "div": 1},
    "_log_softmax": {"exp": 1, "add": 2}, "_softmax_backward_data": {"fma": 2},
    "_log_softmax_backward_data": {"exp": 1, "fma": 1}, "native_layer_norm": {"add": 3, "mul": 3, "rsqrt": 1},
    "layer_norm": {"add": 3, "mul": 3, "rsqrt": 1}, "native_layer_norm_backward": {"fma": 6},
    "_fused_rms_norm": {"fma": 2, "rsqrt": 1}, "rms_norm": {"fma": 2, "rsqrt": 1},
    "nll_loss_forward": {"add": 1}, "nll_loss_backward": {}, "argmax": {"select": 1}, "cumsum": {"add": 1},
}
COPY_OPS = {"copy_", "index_copy", "index_copy_", "_to_copy", "to", "clone", "contiguous", "_copy_from", "copy", "index_put_", "cat",
            "fill_", "zero_", "zeros", "zeros_like", "ones", "full", "empty_like", "new_zeros", "embedding"}


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


def _numel(shape: tuple[int, ...]) -> int:
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


def _decl(inf: Inferred, prefix: str, role: str, shape: tuple[int, ...], dtype: str) -> str | None:
    if not shape or _numel(shape) == 0:
        return None
    name = f"{prefix}.{role}{len(inf.tensors)}"
    inf.tensors[name] = {"shape": list(shape), "dtype": dtype}
    (inf.writes if role == "out" else inf.reads).append(name)
    return name


def _gemm(op: CpuOp) -> dict[str, Any] | None:
    ts = [t for t in input_tensors(op) if t[0]]
    short = op.name
    try:
        if short in ("aten::mm", "aten::_scaled_mm"):
            (a, dt), (b, _) = ts[0], ts[1]
            m, k, n, batch = a[0], a[1], b[1], 1
        elif short in ("aten::addmm", "aten::_addmm_activation"):
            (a, dt), (b, _) = ts[1], ts[2]
            m, k, n, batch = a[0], a[1], b[1], 1
        elif short == "aten::bmm":
            (a, dt), (b, _) = ts[0], ts[1]
            batch, m, k, n = a[0], a[1], a[2], b[2]
        elif short == "aten::baddbmm":
            (a, dt), (b, _) = ts[1], ts[2]
            batch, m, k, n = a[0], a[1], a[2], b[2]
        elif short in ("aten::addmv", "aten::mv"):
            (a, dt) = ts[1] if short == "aten::addmv" else ts[0]
            m, k, n, batch = a[0], a[1], 1, 1
        elif short == "aten::linear":
            (x, dt), (w, _) = ts[0], ts[1]
            m, k, n, batch = _numel(x[:-1]), x[-1], w[0], 1
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
    return {"kind": "gemm", "m": m, "n": n, "k": k, "batch": batch, "dtype": dt}


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


def _gather(op: CpuOp, prefix: str) -> Inferred | None:
    """index_select(table, dim, index) / embedding(table, index): the kernel reads only the rows it
    gathers (and the indices) and writes them; the table's other rows are never touched."""
    ts = input_tensors(op)
    tables = [t for t in ts if t[1] not in ("int64", "int32") and len(t[0]) >= 1]
    index = [t for t in ts if t[1] in ("int64", "int32")]
    if not tables or not index:
        return None
    (table, dt), (idx, idt) = tables[0], index[0]
    row = _numel(table[1:]) if len(table) > 1 else 1
    out = (max(1, _numel(idx)), row)
    inf = Inferred({"kind": "elementwise"})
    _decl(inf, prefix, "in", out, dt)  # the gathered rows
    _decl(inf, prefix, "in", idx if idx else (1,), idt)
    _decl(inf, prefix, "out", out, dt)
    return inf


def _nll(op: CpuOp, prefix: str, backward: bool) -> Inferred | None:
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
    _decl(inf, prefix, "in", (n,), dt)
    _decl(inf, prefix, "in", (n,), "int64")
    _decl(inf, prefix, "out", (n,) if backward else (1,), dt)
    return inf


def streaming_fields(op: CpuOp, kind: str, prefix: str, math: dict[str, float]) -> Inferred | None:
    ts = input_tensors(op)
    shapes = [s for s, _ in ts if s]
    if not shapes:
        return None
    inf = Inferred({"kind": kind})
    for s, dt in ts:
        _decl(inf, prefix, "in", s, dt)
    big = max(ts, key=lambda t: _numel(t[0]))
    if kind == "reduction":
        first = ts[0][0] if ts[0][0] else big[0]
        reduced = _reduced_dims(op, len(first))
        if reduced is None:  # normalizations and scans: the output has the input's shape
            cols = first[-1]
            rows = max(1, _numel(first) // max(1, cols))
            inf.fields.update({"rows": rows, "cols": cols})
            _decl(inf, prefix, "out", first, ts[0][1])
        else:
            dims, keepdim = reduced
            inner = _numel(tuple(first[d] for d in dims))
            outer = max(1, _numel(first) // max(1, inner))
            if len(dims) == len(first):
                # NB: a full reduction runs many blocks, each over a slice, like a row-wise one over the last dim.
                inf.fields.update({"rows": max(1, _numel(first) // max(1, first[-1])), "cols": first[-1]})
            elif dims == list(range(len(dims))):
                # Leading dims reduced (a bias gradient's sum(dim=0)): column sums.
                inf.fields.update({"rows": inner, "cols": outer, "axis": "rows"})
            else:
                # NB: reduced dims that are not leading are priced as a row-wise reduction over them.
                inf.fields.update({"rows": outer, "cols": inner})
            out = tuple(1 if d in dims else x for d, x in enumerate(first)) if keepdim else \
                tuple(x for d, x in enumerate(first) if d not in dims)
            _decl(inf, prefix, "out", out or (1,), ts[0][1])
    else:
        out = _broadcast(shapes)
        _decl(inf, prefix, "out", out, big[1])
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


# PyTorch's pow(tensor, scalar) turns these exponents into cheaper math (pow_tensor_scalar_optimized_kernel).
POW_SPECIAL: dict[float, dict[str, float]] = {
    2.0: {"mul": 1}, 3.0: {"mul": 2}, 0.5: {"sqrt": 1}, -0.5: {"rsqrt": 1}, -1.0: {"reciprocal": 1},
    -2.0: {"mul": 1, "reciprocal": 1}, 1.0: {},
}


def _pow_math(op: CpuOp) -> dict[str, float]:
    concrete = op.concrete or []
    try:
        exponent = float(str(concrete[1]).strip()) if len(concrete) > 1 else None
    except ValueError:
        exponent = None
    return POW_SPECIAL.get(exponent, ELEMENTWISE_MATH["pow"]) if exponent is not None else ELEMENTWISE_MATH["pow"]


ShapeRule = Callable[[CpuOp, str, str], "Inferred | None"]  # (CPU op, tensor-name prefix, kernel name)
_PLUGIN_SHAPES: list[tuple[str, ShapeRule]] = []  # op kinds defined as plugins (sim/ops/), tried first


def add_shape_rule(family: str, rule: ShapeRule) -> None:
    """For a kernel of `family`, try `rule(cpu_op, prefix, kernel_name)` on each enclosing CPU op (innermost
    first) before the built-in rules: the workload fields it returns, or None when the op is not its own."""
    _PLUGIN_SHAPES.append((family, rule))


def infer_op(family: str, stack: list[CpuOp], act: GpuActivity, prefix: str) -> Inferred | None:
    """Workload fields for one GPU activity, or None when its shapes are unknown."""
    if act.cat in ("gpu_memcpy", "gpu_memset"):
        name = act.name.lower()
        direction = "h2d" if "htod" in name else "d2h" if "dtoh" in name else "d2d"
        if act.bytes is None:
            return None
        nbytes = act.bytes
        if act.cat == "gpu_memcpy" and direction == "d2d":
            nbytes *= 2  # read and write
        engine = "copy_engine" if act.cat == "gpu_memcpy" else "sm"
        return Inferred({"kind": "copy", "bytes": nbytes, "engine": engine, "direction": direction})
    for op in reversed(stack):
        for rule_family, rule in _PLUGIN_SHAPES:
            inferred = rule(op, prefix, act.name) if rule_family == family else None
            if inferred is not None:
                return inferred
        short = short_name(op.name)
        if family == "gemm" and op.name in GEMM_OPS:
            fields = _gemm(op)
            if fields is not None:
                return Inferred(fields)
        elif family == "elementwise" and short in ("index_select", "embedding"):
            return _gather(op, prefix)
        elif family == "elementwise" and short in ELEMENTWISE_MATH:
            return streaming_fields(op, "elementwise", prefix, _pow_math(op) if short == "pow" else ELEMENTWISE_MATH[short])
        elif family == "reduction" and short in ("nll_loss_forward", "nll_loss_backward"):
            return _nll(op, prefix, short == "nll_loss_backward")
        elif family == "reduction" and short in REDUCTION_MATH:
            return streaming_fields(op, "reduction", prefix, REDUCTION_MATH[short])
        elif family == "copy" and (short in COPY_OPS or op.name.split("::")[-1] in COPY_OPS):
            inf = streaming_fields(op, "elementwise", prefix, {})
            if inf is None:
                return None
            sizes = [_numel(tuple(t["shape"])) * _BYTES[t["dtype"]] for t in inf.tensors.values()]
            if short.startswith(("index_copy", "index_put")):
                # NB: the destination (first input) is touched only where the source lands.
                sizes = [2 * sizes[-2]] if len(sizes) >= 2 else sizes
            nbytes = sum(sizes)
            return Inferred({"kind": "copy", "bytes": nbytes, "engine": "sm", "direction": "d2d"})
        elif family == "collective":
            fields = _collective(op)
            if fields is not None:
                return Inferred(fields)
    return None


_BYTES = {"fp64": 8, "int64": 8, "fp32": 4, "tf32": 4, "int32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 1,
          "uint8": 1, "bool": 1}
_COLLECTIVES = {"allreduce": "all_reduce", "all_reduce": "all_reduce", "allgather": "all_gather",
                "all_gather": "all_gather", "_allgather_base": "all_gather", "all_gather_into_tensor": "all_gather",
                "reduce_scatter": "reduce_scatter", "_reduce_scatter_base": "reduce_scatter",
                "reduce_scatter_tensor": "reduce_scatter", "all_to_all": "all_to_all", "alltoall": "all_to_all",
                "alltoall_base": "all_to_all", "broadcast": "broadcast", "send": "send_recv", "recv": "send_recv"}
_COMM_DTYPES = {"Float": 4, "BFloat16": 2, "Half": 2, "Double": 8, "Long": 8, "Int": 4, "Byte": 1, "Char": 1}


def _collective(op: CpuOp) -> dict[str, Any] | None:
    """NCCL arguments that PyTorch records on `record_param_comms` / `nccl:*` ops."""
    a = op.args
    name = str(a.get("Collective name", "")).lower()
    kind = _COLLECTIVES.get(name)
    nelems = a.get("In msg nelems") or a.get("In msg size")
    ranks = a.get("Group size")
    esize = _COMM_DTYPES.get(str(a.get("dtype", "")), None)
    if kind is None or not isinstance(nelems, int) or not isinstance(ranks, int) or ranks < 2 or esize is None:
        return None
    nbytes = nelems * esize
    if kind == "all_gather":
        nbytes = max(nbytes, int(a.get("Out msg nelems", 0) or 0) * esize)
    return {"kind": "collective", "collective": kind, "bytes": nbytes, "ranks": ranks}
