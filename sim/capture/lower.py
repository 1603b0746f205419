"""Lower a recording (sim.capture.record) to a workload's tensors and ops, with the lowering
table (lowering.yaml): which kernels each aten op launches on the GPU. No torch needed.

Tensor identity is the storage: a tensor written by one op and read by another has one name,
so `fuse` can drop intermediates. A view that covers part of a storage (q, k and v of one qkv
buffer) is its own tensor (`NAME.part<i>`), so an op is charged the bytes it touches.
Kernel-less work (views, autograd nodes, module calls, CPU ops) is merged into `host` ops
between kernels. An aten op missing from the table is reported in `uncosted` and kept as one
framework op of host time (never dropped).

Host time by framework op: the aten ops one top-level torch call dispatches (F.linear: t and
addmm) are one framework call, as a profiler shows it (`aten::linear`). Its first kernel names
it (`framework_op`), so a profile's host table (host.framework_ops, measured in real models)
prices the whole call; the kernel-less aten ops inside it are part of that call. A call that
launches no kernel (a view, a transpose) is one framework op of a `host` op, named the same way.
Backward ops run under autograd nodes (`autograd_nodes`), not torch calls.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from sim.errors import InputError

TABLE_PATH = Path(__file__).with_name("lowering.yaml")
_DTYPES = {"fp32", "tf32", "bf16", "fp16", "fp8", "int8", "uint8", "bool", "int32", "int64", "fp64"}
_DTYPE_BYTES = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 1, "uint8": 1, "bool": 1,
                "int32": 4, "int64": 8, "fp64": 8}
_REGION = {"forward": "fwd", "backward": "bwd", "optimizer": "opt", "other": "other"}
# multi_tensor_apply (ATen/native/cuda/MultiTensorApply.cuh): tensors per launch by list depth,
# blocks per launch, elements per chunk (one block each)
_MTA_TENSORS = (110, 64, 48, 36, 30)
_MTA_BLOCKS = 320
_MTA_CHUNK = 65536
_FULL_REDUCE_BLOCK = 4096  # elements per block of a full reduction's first pass


@cache
def load_table(path: Path = TABLE_PATH) -> dict[str, Any]:
    """The lowering table (parsed once per path)."""
    with open(path, encoding="utf-8") as f:
        data: dict[str, Any] = yaml.safe_load(f)
    for aten, entry in data["ops"].items():
        if entry.get("rule") not in RULES:
            raise InputError("unknown rule", file=str(path), path=f"ops.{aten}.rule", value=entry.get("rule"),
                             expected="one of: " + ", ".join(sorted(RULES)))
    return data


@dataclass
class Lowered:
    """A recording lowered to workload entries (numbers; sim.capture.shapes makes expressions)."""

    tensors: dict[str, dict[str, Any]]
    ops: list[dict[str, Any]]
    uncosted: dict[str, int]
    torch_recorded: str
    torch_table: str


def _numel(shape: list[int]) -> int:
    return math.prod(shape) if shape else 1


def _refs(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, dict) and "storage" in value:
        yield value
    elif isinstance(value, list):
        for v in value:
            yield from _refs(v)


def _contiguous(ref: dict[str, Any]) -> bool:
    expected = 1
    for size, stride in zip(reversed(ref["shape"]), reversed(ref["stride"]), strict=True):
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True


@dataclass
class _Ctx:
    """State of one lowering: names of storages and views, ops emitted, host work pending."""

    table: dict[str, Any]
    storages: list[dict[str, Any]]
    module_calls: bool
    tensors: dict[str, dict[str, Any]] = field(default_factory=dict)
    ops: list[dict[str, Any]] = field(default_factory=list)
    names: dict[int, str] = field(default_factory=dict)
    parts: dict[tuple[int, int, int], str] = field(default_factory=dict)
    used_names: set[str] = field(default_factory=set)
    uncosted: dict[str, int] = field(default_factory=dict)
    pending: dict[str, int] = field(default_factory=dict)
    pending_at: tuple[str, str] = ("", "forward")
    pending_framework_op: str | None = None
    current_op: str = ""
    kernel_calls: set[int] = field(default_factory=set)  # torch calls that launch a kernel
    calls_done: set[int] = field(default_factory=set)  # torch calls already charged (named on an op)

    # -- names
    def unique(self, base: str) -> str:
        name, i = base, 1
        while name in self.used_names:
            name = f"{base}_{i}"
            i += 1
        self.used_names.add(name)
        return name

    def tensor(self, ref: dict[str, Any], role: str = "out") -> str:
        """The workload tensor of a tensor reference: its storage, or the part of it the view covers."""
        sid = ref["storage"]
        info = self.storages[sid]
        dtype = ref["dtype"] if ref["dtype"] in _DTYPES else "fp32"
        elem = _DTYPE_BYTES[dtype]
        storage_elems = max(1, info["nbytes"] // elem)
        if sid not in self.names:
            base = info.get("name") or f"{self.current_op}.{role}"
            self.names[sid] = self.unique(base)
        name = self.names[sid]
        whole = ref["offset"] == 0 and ref["extent"] >= storage_elems
        if whole:
            if name not in self.tensors:
                shape = ref["shape"] if _numel(ref["shape"]) == storage_elems else [storage_elems]
                self.tensors[name] = {"shape": [max(1, s) for s in shape] or [1], "dtype": dtype}
            return name
        key = (sid, ref["offset"], ref["extent"])
        part = self.parts.get(key)
        if part is None:
            part = self.unique(f"{name}.part{sum(1 for k in self.parts if k[0] == sid)}")
            self.parts[key] = part
            self.tensors[part] = {"shape": [max(1, s) for s in ref["shape"]] or [1], "dtype": dtype}
        return part

    def pseudo(self, base: str, shape: list[int], dtype: str) -> str:
        """A tensor that stands for the rows an indexed kernel touches (gathered, scattered)."""
        name = self.unique(base)
        self.tensors[name] = {"shape": [max(1, s) for s in shape] or [1], "dtype": dtype if dtype in _DTYPES else "fp32"}
        return name

    # -- host work
    def add_host(self, key: str, count: int, module: str, phase: str, framework_op: str | None = None) -> None:
        if self.pending and (self.pending_at != (module, phase) or (
                key == "framework_ops" and "framework_ops" in self.pending
                and self.pending_framework_op != framework_op)):
            self.flush()
        self.pending_at = (module, phase)
        self.pending[key] = self.pending.get(key, 0) + count
        if key == "framework_ops":
            self.pending_framework_op = framework_op

    def flush(self) -> None:
        if not self.pending:
            return
        module, phase = self.pending_at
        op: dict[str, Any] = {"name": self.unique(f"{_prefix(module, phase)}.host"), "kind": "host"}
        op.update({k: v for k, v in self.pending.items() if v})
        if self.pending_framework_op and "framework_ops" in op:
            op["framework_op"] = self.pending_framework_op
        op.update(phase=phase, region=_REGION[phase])
        self.ops.append(op)
        self.pending = {}
        self.pending_framework_op = None

    def emit(self, ev: dict[str, Any], op: dict[str, Any]) -> None:
        self.flush()
        call = ev.get("call")
        if call is not None and call not in self.calls_done:  # the first kernel of a torch call names it
            self.calls_done.add(call)
            op["framework_op"] = framework_op_name(self.table, ev)
        op.setdefault("phase", ev["phase"])
        op.setdefault("region", _REGION[ev["phase"]])
        op["aten"] = ev["aten"]
        self.ops.append(op)

    def launch(self, key: str | dict[str, Any] | None, **extra: Any) -> dict[str, Any] | None:
        if key is None and not extra:
            return None
        cfg = dict(self.table["launches"][key]) if isinstance(key, str) else dict(key or {})
        cfg.update(extra)
        return cfg


def framework_op_name(table: dict[str, Any], ev: dict[str, Any]) -> str:
    """The profiler's name of the top-level framework op an event ran under (`aten::linear` for
    F.linear, `aten::add` for Tensor.__add__): lowering.yaml `calls`, else aten:: and the torch
    function's name; a call the table maps to null is named by its first aten op (indexing)."""
    name = str(ev["call_name"])
    calls = table.get("calls", {})
    if name in calls:
        mapped = calls[name]
        if mapped is not None:
            return str(mapped)
        return "aten::" + ev["aten"].split(".")[1]
    return "aten::" + name


def _prefix(module: str, phase: str) -> str:
    if phase == "optimizer":
        return "optimizer"
    # op names start with a letter: a root Sequential's children ('0', '1') go under 'model.'
    base = module if module and (module[0].isalpha() or module[0] == "_") else f"model.{module}".rstrip(".")
    return f"{base}.bwd" if phase == "backward" else base


def _short(aten: str) -> str:
    parts = aten.split(".")
    return parts[1] if len(parts) > 1 else aten


def _arg(ev: dict[str, Any], name: str, default: Any = None) -> Any:
    if name in ev["kwargs"]:
        return ev["kwargs"][name]
    names = ev["arg_names"]
    if name in names and names.index(name) < len(ev["args"]):
        return ev["args"][names.index(name)]
    return default


def _outputs(ev: dict[str, Any]) -> list[dict[str, Any]]:
    outs = list(_refs(ev["outputs"]))
    if not outs:  # in-place foreach ops return nothing: the mutated arguments are the outputs
        for name in ev["mutates"]:
            outs.extend(_refs(_arg(ev, name)))
    return outs


RuleFn = Callable[[_Ctx, dict[str, Any], dict[str, Any], str], None]
RULES: dict[str, RuleFn] = {}


def rule(name: str) -> Callable[[RuleFn], RuleFn]:
    def deco(fn: RuleFn) -> RuleFn:
        if name in RULES:
            raise ValueError(f"lowering rule {name!r} is already registered")
        RULES[name] = fn
        return fn

    return deco


@rule("gemm")
def _gemm(ctx: _Ctx, ev: dict[str, Any], entry: dict[str, Any], name: str) -> None:
    args = [r for r in ev["args"] if isinstance(r, dict) and "storage" in r]
    a, b = (args[1], args[2]) if ev["aten"].startswith("aten.addmm") else (args[0], args[1])
    out = _outputs(ev)[0]
    flags = "".join("n" if t["stride"][-1] == 1 else "t" for t in (a, b))
    op: dict[str, Any] = {"name": name, "kind": "gemm"}
    if len(a["shape"]) == 3:
        op["batch"] = a["shape"][0]
    op.update(m=a["shape"][-2], n=b["shape"][-1], k=a["shape"][-1], dtype=out["dtype"], layout=flags)
    op["reads"] = [ctx.tensor(r, "in") for r in args if r is not out]
    op["writes"] = [ctx.tensor(out)]
    ctx.emit(ev, op)


@rule("pointwise")
def _pointwise(ctx: _Ctx, ev: dict[str, Any], entry: dict[str, Any], name: str) -> None:
    outs = _outputs(ev)
    numel = _numel(outs[0]["shape"])
    inputs = [r for r in _refs(ev["args"]) if not (r["device"] == "cpu" and _numel(r["shape"]) == 1)]
    if entry.get("concat"):  # inputs are pieces of the output, each copied once
        strided = False
    else:
        strided = any((_numel(r["shape"]) < numel and _numel(r["shape"]) > 1) or not _contiguous(r) for r in inputs)
        strided = strided or any(not _contiguous(o) for o in outs)
    math_ops = dict(entry.get("math", {}))
    if strided:
        math_ops["broadcast_index"] = math_ops.get("broadcast_index", 0) + 1
        launch = ctx.launch("strided")
    else:
        launch = ctx.launch(entry.get("launch", "vectorized"))
    reads = list(dict.fromkeys(ctx.tensor(r, "in") for r in inputs))
    writes = list(dict.fromkeys(ctx.tensor(o, f"out{i}" if i else "out") for i, o in enumerate(outs)))
    op = {"name": name, "kind": "elementwise", "numel": numel, "reads": reads, "writes": writes,
          "math": math_ops, "launch": launch}
    ctx.emit(ev, op)


@rule("fill")
def _fill(ctx: _Ctx, ev: dict[str, Any], entry: dict[str, Any], name: str) -> None:
    out = _outputs(ev)[0]
    nbytes = _numel(out["shape"]) * _DTYPE_BYTES.get(out["dtype"], 4)
    ctx.emit(ev, {"name": name, "kind": "copy", "bytes": nbytes, "writes": [ctx.tensor(out)],
                  "launch": ctx.launch("fill")})


@rule("copy")
def _copy(ctx: _Ctx, ev: dict[str, Any], entry: dict[str, Any], name: str) -> None:
    src = next(_refs(_arg(ev, entry.get("source", "self"))))
    dst = _outputs(ev)[0]
    target = ctx.pseudo(f"{ctx.tensor(dst)}.rows", src["shape"], dst["dtype"])
    ctx.emit(ev, {"name": name, "kind": "copy", "reads": [ctx.tensor(src, "in")], "writes": [target],
                  "launch": ctx.launch(entry.get("launch"))})


@rule("row_norm")
def _row_norm(ctx: _Ctx, ev: dict[str, Any], entry: dict[str, Any], name: str) -> None:
    x = next(_refs(ev["args"]))
    cols = x["shape"][-1]
    rows = _numel(x["shape"]) // max(1, cols)
    key = entry.get("launch")
    launch = ctx.launch(key, grid=rows) if key == "layer_norm" else ctx.launch(key)
    op = {"name": name, "kind": "reduction", "rows": rows, "cols": cols, "passes": entry.get("passes", 1),
          "reads": list(dict.fromkeys(ctx.tensor(r, "in") for r in _refs(ev["args"]))),
          "writes": [ctx.tensor(o, f"out{i}" if i else "out") for i, o in enumerate(_outputs(ev))],
          "math": dict(entry.get("math", {}))}
    if launch:
        op["launch"] = launch
    ctx.emit(ev, op)


@rule("row_norm_backward")
def _row_norm_backward(ctx: _Ctx, ev: dict[str, Any], entry: dict[str, Any], name: str) -> None:
    grad, x = next(_refs(_arg(ev, "grad_out"))), next(_refs(_arg(ev, "input")))
    stats = [r for key in ("mean", "rstd") for r in _refs(_arg(ev, key))]
    weight = list(_refs(_arg(ev, "weight")))
    cols = x["shape"][-1]
    rows = _numel(x["shape"]) // max(1, cols)
    outs = _outputs(ev)
    base = [ctx.tensor(grad, "in"), ctx.tensor(x, "in"), *[ctx.tensor(s, "in") for s in stats]]
    spec = entry["input"]
    ctx.emit(ev, {"name": f"{name}.input", "kind": "reduction", "rows": rows, "cols": cols,
                  "passes": spec.get("passes", 1), "reads": base + [ctx.tensor(w, "in") for w in weight],
                  "writes": [ctx.tensor(outs[0], "grad_input")], "math": dict(spec["math"]),
                  "launch": ctx.launch(spec["launch"], grid=rows)})
    if len(outs) > 1:
        spec = entry["weight"]
        ctx.emit(ev, {"name": f"{name}.weight", "kind": "reduction", "rows": rows, "cols": cols, "axis": "rows",
                      "reads": base, "writes": [ctx.tensor(o, f"grad{i}") for i, o in enumerate(outs[1:])],
                      "math": dict(spec["math"]), "launch": ctx.launch(spec["launch"])})


@rule("column_sum")
def _column_sum(ctx: _Ctx, ev: dict[str, Any], entry: dict[str, Any], name: str) -> None:
    x = next(_refs(ev["args"]))
    rank = len(x["shape"])
    dims = _arg(ev, "dim") or list(range(rank))
    dims = sorted({d % rank for d in dims}) if rank else []
    reduced = _numel([x["shape"][d] for d in dims])
    kept = _numel(x["shape"]) // max(1, reduced)
    last_reduced = rank - 1 in dims
    op = {"name": name, "kind": "reduction", "rows": kept if last_reduced else reduced,
          "cols": reduced if last_reduced else kept, "axis": "cols" if last_reduced else "rows",
          "reads": [ctx.tensor(x, "in")], "writes": [ctx.tensor(o) for o in _outputs(ev)],
          "math": dict(entry.get("math", {}))}
    if not last_reduced and entry.get("launch"):
        op["launch"] = ctx.launch(entry["launch"])
    ctx.emit(ev, op)


@rule("reduce_all")
def _reduce_all(ctx: _Ctx, ev: dict[str, Any], entry: dict[str, Any], name: str) -> None:
    """A whole tensor to one value. NB: PyTorch's reduce_kernel spreads it over many blocks and
    finishes in a last block; priced here as its first pass: one block per 4096 elements."""
    refs = list(_refs(ev["args"]))
    x = min(refs, key=lambda r: _numel(r["shape"])) if entry.get("smallest_input") else refs[0]
    n = _numel(x["shape"])
    cols = min(n, _FULL_REDUCE_BLOCK)
    ctx.emit(ev, {"name": name, "kind": "reduction", "rows": math.ceil(n / cols), "cols": cols,
                  "reads": [ctx.tensor(r, "in") for r in refs if r is x or not entry.get("smallest_input")],
                  "writes": [ctx.tensor(o) for o in _outputs(ev)], "math": dict(entry.get("math", {}))})


def _attention_op(ctx: _Ctx, ev: dict[str, Any], name: str, direction: str, backend: str | None) -> None:
    q = next(_refs(_arg(ev, "query")))
    k = next(_refs(_arg(ev, "key")))
    reads = [r for r in _refs(ev["args"]) if len(r["shape"]) >= 3]
    writes = [o for o in _outputs(ev) if len(o["shape"]) >= 3]
    op = {"name": name, "kind": "attention", "direction": direction, "batch": q["shape"][0], "heads": q["shape"][1],
          "seq_q": q["shape"][2], "seq_kv": k["shape"][2], "head_dim": q["shape"][3],
          "causal": bool(_arg(ev, "is_causal", False)), "dtype": q["dtype"],
          "reads": list(dict.fromkeys(ctx.tensor(r, "in") for r in reads)),
          "writes": [ctx.tensor(o, f"out{i}" if i else "out") for i, o in enumerate(writes)]}
    if backend:
        op["backend"] = backend
    ctx.emit(ev, op)


@rule("attention")
def _attention(ctx: _Ctx, ev: dict[str, Any], entry: dict[str, Any], name: str) -> None:
    _attention_op(ctx, ev, name, "forward", entry.get("backend"))


@rule("attention_backward")
def _attention_backward(ctx: _Ctx, ev: dict[str, Any], entry: dict[str, Any], name: str) -> None:
    _attention_op(ctx, ev, name, "backward", entry.get("backend"))


@rule("gather")
def _gather(ctx: _Ctx, ev: dict[str, Any], entry: dict[str, Any], name: str) -> None:
    weight, indices = next(_refs(_arg(ev, "weight"))), next(_refs(_arg(ev, "indices")))
    out = _outputs(ev)[0]
    rows = ctx.pseudo(f"{ctx.tensor(weight, 'in')}.gathered", out["shape"], weight["dtype"])
    ctx.emit(ev, {"name": name, "kind": "elementwise", "numel": _numel(out["shape"]),
                  "reads": [ctx.tensor(indices, "in"), rows], "writes": [ctx.tensor(out)],
                  "math": {"broadcast_index": 1}, "launch": ctx.launch(entry.get("launch"))})


@rule("embedding_backward")
def _embedding_backward(ctx: _Ctx, ev: dict[str, Any], entry: dict[str, Any], name: str) -> None:
    """NB: approximate with the op kinds there are: the zeroed gradient table (a fill), the sort
    of the indices (a radix sort, priced as four streaming passes over them) and the
    segmented scatter-add of the gradient rows."""
    grad, indices = next(_refs(_arg(ev, "grad_output"))), next(_refs(_arg(ev, "indices")))
    out = _outputs(ev)[0]
    table = ctx.tensor(out, "grad_weight")
    ctx.emit(ev, {"name": f"{name}.zero", "kind": "copy", "writes": [table],
                  "bytes": _numel(out["shape"]) * _DTYPE_BYTES.get(out["dtype"], 4), "launch": ctx.launch("fill")})
    idx = ctx.tensor(indices, "in")
    ordered = ctx.pseudo(f"{idx}.sorted", [_numel(indices["shape"]), 2], indices["dtype"])
    ctx.emit(ev, {"name": f"{name}.sort", "kind": "elementwise", "numel": _numel(indices["shape"]), "reads": [idx],
                  "writes": [ordered], "math": {"broadcast_index": 4}})
    rows = ctx.pseudo(f"{table}.rows", grad["shape"], out["dtype"])
    ctx.emit(ev, {"name": f"{name}.scatter_add", "kind": "elementwise", "numel": _numel(grad["shape"]),
                  "reads": [ctx.tensor(grad, "in"), ordered], "writes": [rows],
                  "math": {"add": 1, "broadcast_index": 1}, "launch": ctx.launch(entry.get("launch"))})


@rule("select_backward")
def _select_backward(ctx: _Ctx, ev: dict[str, Any], entry: dict[str, Any], name: str) -> None:
    grad = next(_refs(_arg(ev, "grad_output")))
    out = _outputs(ev)[0]
    whole = ctx.tensor(out)
    ctx.emit(ev, {"name": f"{name}.zeros", "kind": "copy", "writes": [whole],
                  "bytes": _numel(out["shape"]) * _DTYPE_BYTES.get(out["dtype"], 4), "launch": ctx.launch("fill")})
    part = ctx.pseudo(f"{whole}.slice", grad["shape"], out["dtype"])
    ctx.emit(ev, {"name": f"{name}.copy", "kind": "elementwise", "numel": _numel(grad["shape"]),
                  "reads": [ctx.tensor(grad, "in")], "writes": [part], "math": {"broadcast_index": 1},
                  "launch": ctx.launch("strided")})


@rule("foreach")
def _foreach(ctx: _Ctx, ev: dict[str, Any], entry: dict[str, Any], name: str) -> None:
    lists = [a for a in ev["args"] if isinstance(a, list) and a and isinstance(a[0], dict) and "storage" in a[0]]
    written = {id(r) for n in ev["mutates"] for r in _refs(_arg(ev, n))}
    out_list = list(_refs(ev["outputs"]))
    depth = len(lists) + (1 if out_list else 0)
    max_tensors = _MTA_TENSORS[min(depth, len(_MTA_TENSORS)) - 1]
    # launches: {tensor index: its elements in this launch}, blocks
    launches: list[tuple[dict[int, int], int]] = []
    share: dict[int, int] = {}
    blocks = 0
    for i, ref in enumerate(lists[0]):
        n = _numel(ref["shape"])
        for c in range(max(1, math.ceil(n / _MTA_CHUNK))):
            if i not in share and len(share) == max_tensors:
                launches.append((share, blocks))
                share, blocks = {}, 0
            share[i] = share.get(i, 0) + min(_MTA_CHUNK, n - c * _MTA_CHUNK)
            blocks += 1
            if blocks == _MTA_BLOCKS:
                launches.append((share, blocks))
                share, blocks = {}, 0
    if blocks:
        launches.append((share, blocks))

    def part(ref: dict[str, Any], elems: int, role: str) -> str:
        """The tensor, or the chunks of it that this launch covers (a tensor split over launches)."""
        whole = ctx.tensor(ref, role)
        if elems == _numel(ref["shape"]):
            return whole
        return ctx.pseudo(f"{whole}.chunks", [elems], ref["dtype"])

    for j, (share, grid) in enumerate(launches):
        parts = {(li, i): part(lst[i], elems, "in") for li, lst in enumerate(lists) for i, elems in share.items()}
        outs = {i: part(out_list[i], elems, "out") for i, elems in share.items() if i < len(out_list)}
        reads = list(dict.fromkeys(parts.values()))
        writes = list(dict.fromkeys(
            [parts[(li, i)] for li, lst in enumerate(lists) for i in share if id(lst[i]) in written]
            + list(outs.values())))
        ctx.emit(ev, {"name": f"{name}.{j}" if len(launches) > 1 else name, "kind": "elementwise",
                      "numel": sum(share.values()), "reads": reads, "writes": writes,
                      "math": dict(entry.get("math", {})), "launch": ctx.launch("foreach", grid=grid)})


def _kernelless(ctx: _Ctx, ev: dict[str, Any]) -> None:
    """Host time of an aten op that launches no kernel: part of its torch call when that call
    launches one (or was already counted); else one framework op, named by its call if any."""
    call = ev.get("call")
    if call is None:
        ctx.add_host("framework_ops", 1, ev["module"], ev["phase"])
    elif call not in ctx.kernel_calls and call not in ctx.calls_done:
        ctx.calls_done.add(call)
        ctx.add_host("framework_ops", 1, ev["module"], ev["phase"], framework_op_name(ctx.table, ev))


@rule("none")
def _none(ctx: _Ctx, ev: dict[str, Any], entry: dict[str, Any], name: str) -> None:
    _kernelless(ctx, ev)


@rule("host")
def _host(ctx: _Ctx, ev: dict[str, Any], entry: dict[str, Any], name: str) -> None:
    _kernelless(ctx, ev)


@rule("ignore")
def _ignore(ctx: _Ctx, ev: dict[str, Any], entry: dict[str, Any], name: str) -> None:
    return None


def lower(recording: dict[str, Any], *, module_calls: bool = True, table_path: Path = TABLE_PATH,
          file: str | None = None) -> Lowered:
    """Lower `recording`'s events to workload tensors and ops (numeric shapes)."""
    if recording.get("schema") != "kernelsim.capture/v1":
        raise InputError("not a kernelsim capture recording", file=file, path="schema", value=recording.get("schema"),
                         expected="kernelsim.capture/v1")
    table = load_table(table_path)
    ctx = _Ctx(table=table, storages=recording["storages"], module_calls=module_calls)
    ctx.kernel_calls = {ev["call"] for ev in recording["events"]
                        if ev.get("type") == "op" and ev.get("call") is not None and _launches_kernel(table, ev)}
    for i, ev in enumerate(recording["events"]):
        kind = ev.get("type")
        if kind == "module_call":
            if module_calls:
                ctx.add_host("module_calls", 1, ev["module"], ev["phase"])
        elif kind == "autograd_node":
            ctx.add_host("autograd_nodes", 1, ev["module"], ev["phase"])
        elif kind == "backward_call":
            ctx.add_host("backward_calls", 1, "", "backward")
        elif kind == "op":
            _lower_op(ctx, ev)
        else:
            raise InputError("unknown event type", file=file, path=f"events[{i}].type", value=kind,
                             expected="op, module_call, autograd_node or backward_call")
    ctx.flush()
    return Lowered(tensors=ctx.tensors, ops=ctx.ops, uncosted=ctx.uncosted,
                   torch_recorded=str(recording.get("torch", "?")), torch_table=str(table.get("torch", "?")))


def _on_cpu(ev: dict[str, Any]) -> bool:
    refs = list(_refs(ev["args"])) + list(_refs(ev["outputs"]))
    return bool(refs) and all(r["device"] == "cpu" for r in refs)


def _launches_kernel(table: dict[str, Any], ev: dict[str, Any]) -> bool:
    entry = table["ops"].get(ev["aten"])
    return entry is not None and entry["rule"] not in ("none", "host", "ignore") and not _on_cpu(ev)


def _lower_op(ctx: _Ctx, ev: dict[str, Any]) -> None:
    entry = ctx.table["ops"].get(ev["aten"])
    if entry is None:
        ctx.uncosted[ev["aten"]] = ctx.uncosted.get(ev["aten"], 0) + 1
        ctx.add_host("framework_ops", 1, ev["module"], ev["phase"])
        return
    if entry["rule"] != "ignore" and _on_cpu(ev):
        _kernelless(ctx, ev)  # CPU tensors: host work only
        return
    if entry["rule"] in ("none", "host", "ignore"):
        RULES[entry["rule"]](ctx, ev, entry, "")
        return
    name = ctx.unique(f"{_prefix(ev['module'], ev['phase'])}.{_short(ev['aten'])}")
    ctx.current_op = name
    RULES[entry["rule"]](ctx, ev, entry, name)
