"""Workloads: load a workload file, check it, and build the graph for one shape bucket."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple

from sim import expr
from sim.errors import InputError
from sim.gcpause import paused_gc
from sim.graph import Graph, LaunchConfig, Op, OpPaths, Tensor
from sim.limits import MAX_GRAPH_OPS, MAX_REPEAT
from sim.schema.loader import load_yaml_model
from sim.schema.workload import Bucket, Launch, OpBase, RepeatBlock, WorkloadFile

# Op fields that are not dimension expressions.
_META_FIELDS = frozenset(OpBase.model_fields) | {"kind", "math", "dtype", "layout", "causal", "direction",
                                                 "engine", "transform", "collective", "axis", "group", "algorithm",
                                                 "protocol", "backend", "impl"}


@dataclass(frozen=True)
class Workload:
    """A validated workload file (plus where it came from)."""

    spec: WorkloadFile
    file: str

    @property
    def name(self) -> str:
        return self.spec.name

    def buckets(self, override: list[Bucket] | None = None) -> list[Bucket]:
        return list(override) if override is not None else list(self.spec.distribution.buckets)

    def params_for(self, bucket: Bucket) -> dict[str, float]:
        params = dict(self.spec.parameters)
        params.update(bucket.params)
        return params

    def build(self, params: dict[str, float]) -> Graph:
        return build_graph(self.spec, params, self.file)


def load_workload(path: Path) -> Workload:
    spec = load_yaml_model(path, WorkloadFile)
    wl = Workload(spec=spec, file=str(path))
    check_workload(wl)
    return wl


def _int(value: float, *, file: str, path: str, minimum: int = 0) -> int:
    if value != int(value):
        raise InputError("must be a whole number", file=file, path=path, value=value)
    if value < minimum:
        raise InputError(f"must be >= {minimum}", file=file, path=path, value=value)
    return int(value)


def build_launch(launch: Launch | None, env: dict[str, float], *, file: str, path: str) -> LaunchConfig | None:
    if launch is None:
        return None
    values: dict[str, int | None] = {}
    for key in Launch.model_fields:
        raw = getattr(launch, key)
        if raw is None:
            values[key] = None
            continue
        v = expr.evaluate_at(raw, env, file=file, path=f"{path}.{key}")
        values[key] = _int(v, file=file, path=f"{path}.{key}", minimum=0 if key in ("smem_per_block", "spill_bytes_per_thread", "spill_traffic_bytes_per_thread") else 1)
    per_row, rows, block = values["threads_per_row"], values["rows_per_block"], values["block"]
    if per_row is not None and rows is not None and block is not None and per_row * rows != block:
        raise InputError(f"rows_per_block × threads_per_row = {rows * per_row} differs from block", file=file,
                         path=f"{path}.rows_per_block", value=rows, expected=f"rows_per_block × threads_per_row = {block}")
    for key in ("threads_per_row", "rows_per_block"):
        if values[key] is not None and block is not None and values[key] > block:  # type: ignore[operator]
            raise InputError("exceeds the block's threads", file=file, path=f"{path}.{key}", value=values[key],
                             expected=f"at most block = {block}")
    # the workload format's launch fields are whole numbers; spill_reload_distances (a table) comes from records only
    return LaunchConfig(**values)  # type: ignore[arg-type]


def build_op(raw: OpBase, env: dict[str, float], *, file: str, path: str, mode: str) -> Op:
    """Evaluate one op's expressions for a bucket."""
    attrs: dict[str, Any] = {}
    data = raw.model_dump(by_alias=False)
    for key, val in data.items():
        if key in _META_FIELDS:
            continue
        if val is None:
            continue
        v = expr.evaluate_at(val, env, file=file, path=f"{path}.{key}")
        if isinstance(v, bool):
            attrs[key] = v
            continue
        if v < 0:
            raise InputError("must be >= 0", file=file, path=f"{path}.{key}", value=v, expected="a non-negative size")
        attrs[key] = v
    for key in ("dtype", "layout", "causal", "direction", "engine", "transform", "collective", "axis", "group",
                "algorithm", "protocol"):
        if key in data:
            attrs[key] = data[key]
    if data.get("backend") is not None:  # an attention library named by the workload
        attrs["backend"] = data["backend"]
    if data.get("impl") is not None:  # a reduction's library kernel (PyTorch's softmax: its own kernel choice)
        attrs["impl"] = data["impl"]
    if "math" in data:
        m = {}
        for name, val in data["math"].items():
            v = expr.evaluate_at(val, env, file=file, path=f"{path}.math.{name}")
            if v < 0:
                raise InputError("must be >= 0", file=file, path=f"{path}.math.{name}", value=v)
            m[name] = float(v)
        attrs["math"] = MappingProxyType(m)
    for key in ("measured_us", "device_gap_us", "family", "correlation", "trace_name", "framework_op"):
        if data.get(key) is not None:
            attrs[key] = data[key]
    if raw.unpriced:
        attrs["unpriced"] = True
    launches = _int(expr.evaluate_at(raw.launches, env, file=file, path=f"{path}.launches"), file=file,
                    path=f"{path}.launches", minimum=1)
    if launches > 1:
        if data["kind"] not in MULTI_LAUNCH_KINDS:
            raise InputError("only elementwise and copy ops can launch several kernels", file=file,
                             path=f"{path}.launches", value=launches, expected=f"1 for an op of kind {data['kind']}")
        attrs["launches"] = launches
    if raw.tensors is not None:
        attrs["tensors"] = _int(expr.evaluate_at(raw.tensors, env, file=file, path=f"{path}.tensors"), file=file,
                                path=f"{path}.tensors", minimum=1)
    launch = build_launch(raw.launch, env, file=file, path=f"{path}.launch")
    if launch is not None and data["kind"] != "reduction":
        for key in ("threads_per_row", "rows_per_block"):
            if getattr(launch, key) is not None:
                raise InputError(f"'{key}' applies to reductions only", file=file, path=f"{path}.launch.{key}",
                                 value=data["kind"], expected="an op of kind reduction")
    return Op(
        name=raw.name,
        kind=data["kind"],
        reads=tuple(raw.reads),
        writes=tuple(raw.writes),
        stream=raw.stream,
        after=tuple(raw.after),
        phase=raw.phase,
        region=raw.region,
        mode=mode,
        library=raw.library,
        launch=launch,
        attrs=MappingProxyType(attrs),
        host_s=raw.host_us * 1e-6 if raw.host_us is not None else None,
    )


MULTI_LAUNCH_KINDS = frozenset({"elementwise", "copy"})


def expand_launches(ops: list[Op]) -> list[Op]:
    """An op with `launches: N` becomes N kernel ops on its stream: `NAME.launch<k>` then `NAME` (the
    last keeps the name, so waits on it wait for all), each with 1/N of the work (`launch_share`);
    only the first pays the framework dispatch (`follow_on` marks the others: a launch each)."""
    out: list[Op] = []
    for op in ops:
        n = int(op.attrs.get("launches", 1))
        if n <= 1:
            out.append(op)
            continue
        attrs = {k: v for k, v in op.attrs.items() if k != "launches"}
        attrs["launch_share"] = 1.0 / n
        if "bytes" in attrs:
            attrs["bytes"] = float(attrs["bytes"]) / n
        for k in range(n):
            extra = {"follow_on": True} if k else {}
            out.append(op.with_(name=op.name if k == n - 1 else f"{op.name}.launch{k}",
                                after=op.after if k == 0 else (), attrs={**attrs, **extra, "launch_index": k}))
    return out


class _Flat(NamedTuple):
    """One op of the expanded program: its declaration, key path and its final names."""

    src: OpBase
    path: str
    name: str
    after: tuple[str, ...]
    reads: tuple[str, ...]
    writes: tuple[str, ...]


def flat_ops(spec: WorkloadFile, params: dict[str, float], file: str) -> list[tuple[OpBase, str]]:
    """Entries with repeat blocks expanded: (op with its final names, key path in the file)."""
    out: list[tuple[OpBase, str]] = []
    for f in _flat(spec, params, file):
        if f.src.name == f.name and f.path.count("[") == 1:  # a top-level op, as declared
            out.append((f.src, f.path))
        else:
            out.append((f.src.model_copy(update={"name": f.name, "after": list(f.after), "reads": list(f.reads),
                                                  "writes": list(f.writes)}), f.path))
    return out


def _flat(spec: WorkloadFile, params: dict[str, float], file: str) -> list[_Flat]:
    """The program with repeat blocks expanded, as names only (no copies of the declarations)."""
    out: list[_Flat] = []
    for i, entry in enumerate(spec.ops):
        if isinstance(entry, RepeatBlock):
            out.extend(_expand_repeat(entry, params, file, f"ops[{i}]"))
            check_graph_size(1, 0, len(out), file=file, path=f"ops[{i}].count")
        else:
            out.append(_Flat(entry, f"ops[{i}]", entry.name, tuple(entry.after), tuple(entry.reads),
                             tuple(entry.writes)))
    return out


def _expand_repeat(block: RepeatBlock, params: dict[str, float], file: str, where: str) -> list[_Flat]:
    """`count` copies of the block's body (inner blocks expanded first), with per-iteration names.

    Ops become `NAME<r>.op`; a tensor the body writes becomes `T@<r>` in iteration r (the last
    iteration keeps `T`), and every read sees the newest version of its tensor, so an op after
    the block, or the next iteration, reads what the last one wrote. Without this a fusion
    inside one iteration would see the next iteration's reads of the same name and keep its
    intermediates in HBM.
    """
    count = _int(expr.evaluate_at(block.count, params, file=file, path=f"{where}.count"),
                 file=file, path=f"{where}.count", minimum=0)
    body: list[_Flat] = []
    for j, entry in enumerate(block.ops):
        if isinstance(entry, RepeatBlock):
            body.extend(_expand_repeat(entry, params, file, f"{where}.ops[{j}]"))
        else:
            body.append(_Flat(entry, f"{where}.ops[{j}]", entry.name, tuple(entry.after), tuple(entry.reads),
                              tuple(entry.writes)))
    check_graph_size(count, len(body), 0, file=file, path=f"{where}.count")
    local = {f.name for f in body}
    written = {t for f in body for t in f.writes} - set(block.carried)
    out: list[_Flat] = []
    version: dict[str, str] = {}
    for r in range(count):
        prefix = f"{block.name}{r}."
        suffix = "" if r == count - 1 else f"@{r}"
        named: dict[str, str] = {}  # this iteration's names: one string each, however often it is written
        # and one tuple object per distinct tuple of names (e.g. one op's writes and the next one's reads)
        tuples: dict[tuple[str, ...], tuple[str, ...]] = {}
        for f in body:
            reads = tuple([version.get(t, t) for t in f.reads])
            reads = tuples.setdefault(reads, reads)
            for t in f.writes:
                if t in written:
                    v = named.get(t)
                    if v is None:
                        v = named[t] = t + suffix  # an inner block's `T@<j>` becomes `T@<j>@<r>`
                    version[t] = v
            writes = tuple([version.get(t, t) for t in f.writes])
            writes = tuples.setdefault(writes, writes)
            after = tuple([prefix + a if a in local else a for a in f.after]) if f.after else ()
            out.append(_Flat(f.src, f.path, prefix + f.name, after, reads, writes))
    return out


def _instantiated_ops(spec: WorkloadFile, params: dict[str, float], file: str) -> list[Op]:
    """The ops of `_instantiated` without their key paths."""
    return _instantiated(spec, params, file)[0]


def _instantiated(spec: WorkloadFile, params: dict[str, float], file: str) -> tuple[list[Op], list[str]]:
    """build_op over flat_ops, with each declaration evaluated once: a repeat block's body has the
    same sizes in every iteration (only names differ), so each iteration copies the op built for
    its key path and renames it (Op.renamed), several times faster than building every copy.
    The ops in program order and each one's key path (two lists: no pair per op)."""
    built: dict[str, Op] = {}
    ops: list[Op] = []
    paths: list[str] = []
    flat = _flat(spec, params, file)
    # Each entry is dropped once used, so that its memory serves the ops made next (peak memory: an
    # entry per op of a 1M-op graph would otherwise live beside all the ops until the end).
    flat.reverse()
    pop = flat.pop
    while flat:
        f = pop()
        op = built.get(f.path)
        if op is None:
            op = built[f.path] = build_op(f.src, params, file=file, path=f.path, mode=spec.mode)
        if op.name != f.name or op.after != f.after or op.reads != f.reads or op.writes != f.writes:
            op = op.renamed(f.name, f.after, f.reads, f.writes)
        ops.append(op)
        paths.append(f.path)
    return ops, paths


def declared_name(tensor: str) -> str:
    """The `tensors` entry a (possibly per-iteration) tensor name refers to."""
    return tensor.split("@", 1)[0]


def check_graph_size(count: int, ops_per_copy: int, ops_so_far: int, *, file: str, path: str) -> None:
    """A repeat count and the graph it makes stay within the limits (sim/limits.py)."""
    if count > MAX_REPEAT:
        raise InputError(f"repeat count over the limit of {MAX_REPEAT} (set KERNELSIM_MAX_REPEAT to raise it)",
                         file=file, path=path, value=count)
    if ops_so_far + count * ops_per_copy > MAX_GRAPH_OPS:
        raise InputError(f"the graph would have {ops_so_far + count * ops_per_copy} ops, over the limit of "
                         f"{MAX_GRAPH_OPS} (set KERNELSIM_MAX_GRAPH_OPS to raise it)", file=file, path=path, value=count)


def build_graph(spec: WorkloadFile, params: dict[str, float], file: str) -> Graph:
    """The graph of `spec` at parameter values `params`."""
    tensors: dict[str, Tensor] = {}
    for tname, decl in spec.tensors.items():
        shape = []
        for j, dim in enumerate(decl.shape):
            v = expr.evaluate_at(dim, params, file=file, path=f"tensors.{tname}.shape[{j}]")
            shape.append(_int(v, file=file, path=f"tensors.{tname}.shape[{j}]", minimum=1))
        tensors[tname] = Tensor(name=tname, shape=tuple(shape), dtype=decl.dtype)
    with paused_gc():  # a big step allocates millions of objects and no cycles (sim.gcpause)
        flat_ops, paths = _instantiated(spec, params, file)
        launches = 0
        for op, path in zip(flat_ops, paths, strict=True):
            launches += max(1, int(op.attrs.get("launches", 1)))
            if launches > MAX_GRAPH_OPS:
                raise InputError(f"the graph would have more than {MAX_GRAPH_OPS} kernels once `launches` expand "
                                 "(set KERNELSIM_MAX_GRAPH_OPS to raise it)", file=file, path=f"{path}.launches",
                                 value=op.attrs.get("launches"))
        ops = expand_launches(flat_ops)
        if any(o.phase == "backward" for o in ops):  # a training step: autograd records the forward's framework ops
            ops = [o.with_(attrs={**o.attrs, "requires_grad": True})
                   if o.phase == "forward" and "framework_op" in o.attrs else o for o in ops]
        for op in ops:  # per-iteration names of repeat blocks share their declaration's shape
            for t in op.reads + op.writes:
                if t not in tensors:
                    base = tensors[declared_name(t)]
                    tensors[t] = Tensor(name=t, shape=base.shape, dtype=base.dtype)
        graph_ops = tuple(ops)
        # The graph's ops have the flat program's names, in its order, unless `launches` added ops.
        named = graph_ops if len(graph_ops) == len(flat_ops) else tuple(flat_ops)
        op_paths = OpPaths(named, tuple(paths))
        del paths
    return Graph(
        name=spec.name,
        kind=spec.kind,
        params=MappingProxyType(dict(params)),
        tensors=MappingProxyType(tensors),
        ops=graph_ops,
        file=file,
        op_paths=op_paths,
    )


def _body_writes(block: RepeatBlock) -> set[str]:
    return {t for o in block.ops for t in (_body_writes(o) if isinstance(o, RepeatBlock) else o.writes)}


def _check_counts(block: RepeatBlock, names: set[str], file: str, where: str) -> None:
    expr.check(block.count, names, file=file, path=f"{where}.count")
    writes = _body_writes(block)
    for j, t in enumerate(block.carried):
        if t not in writes:
            raise InputError("the block's ops do not write this tensor", file=file, path=f"{where}.carried[{j}]",
                             value=t, expected="a tensor written inside the block: " + ", ".join(sorted(writes)))
    for j, o in enumerate(block.ops):
        if isinstance(o, RepeatBlock):
            _check_counts(o, names, file, f"{where}.ops[{j}]")


def check_workload(wl: Workload) -> None:
    """Static checks: names, tensor references, dependency order, buckets' parameters, expressions."""
    spec, file = wl.spec, wl.file
    names = set(spec.parameters)
    for b in spec.distribution.buckets:
        names |= set(b.params)
    if not math.isfinite(sum(b.weight for b in spec.distribution.buckets)):
        raise InputError("the bucket weights add up to more than a float can hold", file=file,
                         path="distribution.buckets", expected="finite weights (they are normalized; e.g. shares)")
    for i, b in enumerate(spec.distribution.buckets):
        unknown = set(b.params) - set(spec.parameters)
        if unknown:
            raise InputError(
                f"bucket sets parameter '{sorted(unknown)[0]}' that the workload does not declare",
                file=file,
                path=f"distribution.buckets[{i}].params",
                expected="one of: " + ", ".join(sorted(spec.parameters)),
            )
    for tname, decl in spec.tensors.items():
        for j, dim in enumerate(decl.shape):
            expr.check(dim, names, file=file, path=f"tensors.{tname}.shape[{j}]")
    for i, entry in enumerate(spec.ops):
        if isinstance(entry, RepeatBlock):
            _check_counts(entry, names, file, f"ops[{i}]")
    for bucket in spec.distribution.buckets[:1]:
        flat = flat_ops(spec, wl.params_for(bucket), file)
    index = {o.name: i for i, (o, _) in enumerate(flat)}
    for i, (op, where) in enumerate(flat):
        for key, val in op.model_dump().items():
            if key in _META_FIELDS or val is None:
                continue
            expr.check(val, names, file=file, path=f"{where}.{key}")
        for mname, val in getattr(op, "math", {}).items():
            expr.check(val, names, file=file, path=f"{where}.math.{mname}")
        if op.launch is not None:
            for key in Launch.model_fields:
                v = getattr(op.launch, key)
                if v is not None:
                    expr.check(v, names, file=file, path=f"{where}.launch.{key}")
        for j, t in enumerate(op.reads + op.writes):
            if declared_name(t) not in spec.tensors:
                field_name = "reads" if j < len(op.reads) else "writes"
                k = j if j < len(op.reads) else j - len(op.reads)
                raise InputError(
                    "unknown tensor", file=file, path=f"{where}.{field_name}[{k}]", value=t,
                    expected="a tensor declared under 'tensors'",
                )
        for j, a in enumerate(op.after):
            if a not in index:
                raise InputError("unknown op", file=file, path=f"{where}.after[{j}]", value=a, expected="an op name")
            if index[a] >= i:
                other = flat[index[a]][0]
                cyc = op.name in other.after
                raise InputError(
                    "dependency cycle" if cyc else "waits for an op that the host issues later (would deadlock)",
                    file=file,
                    path=f"{where}.after[{j}]",
                    value=a,
                    expected="an op earlier in program order",
                )
    # Evaluate every bucket once so bad sizes surface at load time, not mid-run.
    for i, b in enumerate(spec.distribution.buckets):
        try:
            build_graph(spec, wl.params_for(b), file)
        except InputError as exc:
            raise InputError(
                f"{exc.problem} (in bucket {i}: {dict(b.params)})", file=exc.file, path=exc.path, value=exc.value,
                expected=exc.expected,
            ) from None
