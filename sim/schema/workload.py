"""Schema of a workload file: parameters, shape buckets, tensors and a graph of ops.

Shapes and sizes are numbers or expressions of the parameters (sim.expr, never eval).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union, cast, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.fields import FieldInfo

Expr = int | float | str
DType = Literal["fp32", "tf32", "bf16", "fp16", "fp8", "int8", "uint8", "bool", "int32", "int64", "fp64"]
Mode = Literal["eager", "compiled", "cuda_graph"]
Phase = Literal["forward", "backward", "optimizer", "other"]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Bucket(Strict):
    params: dict[str, float | int]
    weight: float = Field(gt=0)
    name: str | None = None


class Distribution(Strict):
    buckets: list[Bucket] = Field(min_length=1)
    alternatives: dict[str, list[Bucket]] = Field(default_factory=dict)


class TensorDecl(Strict):
    shape: list[Expr] = Field(min_length=1)
    dtype: DType


class Launch(Strict):
    """Launch configuration; sizes may be expressions. Unset fields are estimated by the cost model."""

    block: Expr | None = None
    grid: Expr | None = None
    elems_per_thread: Expr | None = None
    regs_per_thread: Expr | None = None
    spill_bytes_per_thread: Expr | None = None
    spill_traffic_bytes_per_thread: Expr | None = None
    smem_per_block: Expr | None = None
    threads_per_row: Expr | None = Field(
        default=None, description="row reductions: threads that reduce one row (e.g. 32: a warp per row)")
    rows_per_block: Expr | None = Field(
        default=None, description="row reductions: rows one block covers (block = rows_per_block × threads_per_row)")


class OpBase(Strict):
    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_.]*$")
    reads: list[str] = Field(default_factory=list)
    writes: list[str] = Field(default_factory=list)
    stream: int = Field(default=0, ge=0)
    after: list[str] = Field(default_factory=list, description="ops (on any stream) this op waits for")
    phase: Phase = "forward"
    region: str | None = None
    launch: Launch | None = None
    library: str = "torch"
    framework_op: str | None = Field(
        default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_:.]*$",
        description="the framework op this op is one call of (aten::addmm, aten::view, MmBackward0): its eager host "
                    "cost comes from the profile's host.framework_ops table when the op is there; on a host op, "
                    "the op of its `framework_ops` calls")
    # Measurements carried by ops imported from a profiler trace (sim.ingest); all optional.
    measured_us: float | None = Field(default=None, ge=0, description="the kernel's measured device time")
    device_gap_us: float | None = Field(
        default=None, ge=0, description="measured stream idle time before this already-queued kernel")
    host_us: float | None = Field(default=None, ge=0, description="measured host time before issuing this op")
    family: str | None = Field(default=None, description="kernel family recognised from the trace's kernel name")
    correlation: int | None = Field(default=None, description="the trace's launch correlation id")
    trace_name: str | None = Field(default=None, description="the kernel's name in the trace")
    unpriced: bool = Field(default=False, description="shapes unknown: always use measured_us, never the cost model")
    launches: Expr = Field(
        default=1, description="kernels this one framework op launches (e.g. a foreach optimizer's chunks): its work"
        " split evenly over them, back to back on its stream, with one host dispatch (elementwise and copy ops)")
    tensors: Expr | None = Field(
        default=None, description="tensors in each list of its foreach framework op (aten::_foreach_mul_: an "
        "optimizer's parameters): the host table prices such a call per tensor where it has the op's per-tensor cost; "
        "on the first op of a compiled region called with autograd, the tensors the compiled function takes "
        "(parameters and inputs; on its backward region's first op, those its forward took)")

    @model_validator(mode="after")
    def _unpriced_needs_measurement(self) -> OpBase:
        if self.unpriced and self.measured_us is None:
            raise ValueError(f"op {self.name!r}: 'unpriced: true' needs 'measured_us'")
        return self


class Straggler(Strict):
    """One slow rank: its kernels take `slowdown` × as long, its host starts `delay_us` late."""

    rank: int = Field(ge=0)
    slowdown: Expr = Field(default=1.0, description="kernels' time × this (>= 1); may be an expression of the parameters")
    delay_us: Expr = Field(default=0.0, description="the rank's host starts this late (>= 0)")


class Jitter(Strict):
    """Every rank's kernels slowed by a random factor in [1, 1 + fraction] (seeded: the same run every time)."""

    fraction: float = Field(gt=0, le=1)
    seed: int = 0


class Parallel(Strict):
    """Ranks of one step: tensor × data × pipeline = ranks (tensor fastest, then data, then pipeline).

    Every rank runs this workload's graph; collectives meet within their `group`. NB: pipeline
    stages running different layers are not modeled (each rank runs the whole graph).
    """

    ranks: Expr
    data: Expr | None = Field(default=None, description="default: ranks / (tensor × pipeline)")
    tensor: Expr = 1
    pipeline: Expr = 1
    stragglers: list[Straggler] = Field(default_factory=list)
    jitter: Jitter | None = None



# The op kinds' spec models are defined as plugins (sim/ops/) and join the union through `add_op_model`;
# the fields that hold ops are retyped then. `Op` and `Entry` are their static types until then.
Op = Any
Entry = Any


class RepeatBlock(Strict):
    """`count` copies of `ops` (e.g. the layers of a stack); op names become `NAME<i>.op`.

    Blocks may nest (`outer<i>.inner<j>.op`). Every iteration writes its own tensors: a tensor
    the body writes is named `T@<i>` in iteration i (the last iteration keeps `T`, so ops after
    the block read it), and a read sees the newest version, so a body that reads `x` before
    writing it reads the previous iteration's `x` (loop-carried state). Tensors listed in
    `carried` keep one name in every iteration (a buffer updated in place, e.g. an accumulator).
    """

    kind: Literal["repeat"]
    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    count: Expr
    carried: list[str] = Field(
        default_factory=list, description="tensors the body writes that keep one name in every iteration")
    ops: list[Entry] = Field(min_length=1)


RepeatBlock.model_rebuild()

_OP_MODELS: list[type[OpBase]] = []  # the op kinds (sim/ops/), in definition order


def op_models() -> tuple[type[BaseModel], ...]:
    """Every entry model of a workload's `ops` list, in union order: the op models, then `repeat`."""
    return (*_OP_MODELS, RepeatBlock)


def entry_union() -> Any:
    """The discriminated union a workload's `ops` entries are validated against (plugins included)."""
    return Annotated[Union[op_models()], Field(discriminator="kind")]  # noqa: UP007 - built from a tuple


def op_kinds() -> tuple[str, ...]:
    """The `kind` literals of every entry model, in union order: a new op model is listed once, there."""
    return tuple(kind for model in op_models() for kind in get_args(model.model_fields["kind"].annotation))


def op_union() -> Any:
    """The discriminated union of the op models (plugins included), without `repeat`."""
    return Annotated[Union[tuple(_OP_MODELS)], Field(discriminator="kind")]  # noqa: UP007 - built from a tuple


# Fields typed with an op union, outside this module too (a scenario's `insert` transform):
# (model, field name, whether `repeat` is allowed, whether the field is a list).
_OP_FIELDS: list[tuple[type[BaseModel], str, bool, bool]] = []


def uses_op_union(model: type[BaseModel], name: str, *, entries: bool, many: bool) -> None:
    """Declare that `model.name` holds ops (`entries`: `repeat` blocks too; `many`: a list): it is typed with
    the union of the op kinds defined so far and retyped when one is added (`add_op_model`)."""
    _OP_FIELDS.append((model, name, entries, many))
    add_schema_model(model)
    if _OP_MODELS:
        _retype_op_fields([(model, name, entries, many)])
        rebuild_with_containers({model})


# Schema models defined outside sim/schema (op kinds' spec models, transforms' argument models, models with
# op fields): `rebuild_with_containers` rebuilds them too when they contain a changed model.
_PLUGIN_MODELS: list[type[BaseModel]] = []


def add_schema_model(model: type[BaseModel]) -> None:
    """Count a model defined outside sim/schema among the schema's models (see `rebuild_with_containers`)."""
    if model not in _PLUGIN_MODELS:
        _PLUGIN_MODELS.append(model)


def _retype_op_fields(op_fields: list[tuple[type[BaseModel], str, bool, bool]]) -> None:
    for owner, name, entries, many in op_fields:
        union = entry_union() if entries else op_union()
        annotation = cast(Any, list)[union] if many else union
        owner.__pydantic_fields__[name] = FieldInfo.merge_field_infos(owner.model_fields[name], annotation=annotation)


def add_op_model(model: type[OpBase]) -> None:
    """Add an op kind's spec model to the workload schema (sim.ops.define calls this): the union lists it
    last (before `repeat`); every field that holds ops (`uses_op_union`) is retyped with the new union and
    every schema model that contains one is rebuilt, inner models first."""
    taken = set(op_kinds())
    clash = [k for k in get_args(model.model_fields["kind"].annotation) if k in taken]
    if clash:
        raise ValueError(f"op kind {clash[0]!r} is already defined")
    _OP_MODELS.append(model)
    add_schema_model(model)
    _retype_op_fields(_OP_FIELDS)
    rebuild_with_containers({owner for owner, *_ in _OP_FIELDS})


def rebuild_with_containers(owners: set[type[BaseModel]]) -> None:
    """Rebuild models whose fields changed, and every schema model that contains one, inner models first."""
    for owner in _containers(owners):
        owner.model_rebuild(force=True)


def _containers(owners: set[type[BaseModel]]) -> list[type[BaseModel]]:
    """`owners` and every schema model that contains one (through its fields), inner models first."""
    import sys

    models = [m for mod_name, mod in list(sys.modules.items()) if mod_name.startswith("sim.schema") and mod
              for m in vars(mod).values()
              if isinstance(m, type) and issubclass(m, BaseModel) and m.__module__ == mod_name]
    models += [m for m in _PLUGIN_MODELS if m not in models]
    known = set(models)
    inner = {m: _inner_models(m) & known - {m} for m in models}
    needed = set(owners)
    changed = True
    while changed:
        changed = False
        for m, kids in inner.items():
            if m not in needed and kids & needed:
                needed.add(m)
                changed = True
    order: list[type[BaseModel]] = []

    def visit(m: type[BaseModel], seen: set[type[BaseModel]]) -> None:
        if m in order or m in seen:
            return
        seen.add(m)
        for kid in sorted(inner.get(m, set()) & needed, key=lambda k: k.__qualname__):
            visit(kid, seen)
        order.append(m)

    for m in sorted(needed, key=lambda k: (k.__module__, k.__qualname__)):
        visit(m, set())
    return order


def _inner_models(model: type[BaseModel]) -> set[type[BaseModel]]:
    """The models `model`'s fields are typed with (anywhere inside their annotations)."""
    found: set[type[BaseModel]] = set()

    def walk(ann: Any) -> None:
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            found.add(ann)
        for a in get_args(ann):
            walk(a)
    for f in model.model_fields.values():
        walk(f.annotation)
    return found


class WorkloadFile(Strict):
    schema_: Literal["kernelsim.workload/v1"] = Field(alias="schema")
    name: str
    kind: Literal["training", "serving"]
    description: str = ""
    mode: Mode = "eager"
    parameters: dict[str, float | int] = Field(default_factory=dict)
    distribution: Distribution
    tensors: dict[str, TensorDecl] = Field(default_factory=dict)
    parallel: Parallel | None = Field(default=None, description="run the step on several ranks (sim.ranks)")
    ops: list[Entry] = Field(min_length=1)

    @field_validator("tensors", mode="after")
    @classmethod
    def _plain_tensor_names(cls, tensors: dict[str, TensorDecl]) -> dict[str, TensorDecl]:
        for name in tensors:
            if "@" in name:
                raise ValueError(f"tensor name {name!r} contains '@', which marks a repeat block's per-iteration names")
        return tensors

    @field_validator("ops", mode="before")
    @classmethod
    def _known_kind(cls, ops: object) -> object:
        if isinstance(ops, list):
            for i, op in enumerate(ops):
                if isinstance(op, dict) and "kind" in op and op["kind"] not in op_kinds():
                    raise ValueError(
                        f"ops[{i}].kind: unknown op kind {op['kind']!r} (expected one of: {', '.join(op_kinds())})"
                    )
        return ops

    @field_validator("ops", mode="after")
    @classmethod
    def _names_unique(cls, ops: list[Entry]) -> list[Entry]:
        seen: set[str] = set()
        for op in ops:
            if op.name in seen:
                raise ValueError(f"op name {op.name!r} is used twice; op names must be unique")
            seen.add(op.name)
            if isinstance(op, RepeatBlock):
                _inner_names_unique(op)
        return ops


uses_op_union(RepeatBlock, "ops", entries=True, many=True)
uses_op_union(WorkloadFile, "ops", entries=True, many=True)


def _inner_names_unique(block: RepeatBlock) -> None:
    inner: set[str] = set()
    for o in block.ops:
        if o.name in inner:
            raise ValueError(f"op name {o.name!r} is used twice in repeat block {block.name!r}")
        inner.add(o.name)
        if isinstance(o, RepeatBlock):
            _inner_names_unique(o)
