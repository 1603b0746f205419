"""Edits: set_launch (another launch config for an op), insert (add an op, e.g. a layout
conversion on a fallback path), remove (drop ops)."""

from __future__ import annotations

from types import MappingProxyType

from pydantic import Field, model_validator

from sim import expr
from sim.graph import Graph
from sim.schema.scenario import Strict
from sim.schema.workload import Expr, Launch, Op, uses_op_union
from sim.transforms import Context, define
from sim.workload import build_launch, build_op


class SetLaunchArgs(Strict):
    op: str
    launch: Launch
    passes: Expr | None = Field(
        default=None, description="a reduction's sweeps over each row under this kernel (e.g. 1 when a looped"
        " kernel's second sweep hits the cache)")


class InsertArgs(Strict):
    op: Op
    before: str | None = None
    after: str | None = None

    @model_validator(mode="after")
    def _one_anchor(self) -> InsertArgs:
        if (self.before is None) == (self.after is None):
            raise ValueError("give exactly one of 'before' or 'after'")
        return self


uses_op_union(InsertArgs, "op", entries=False, many=False)  # an op kind defined later (sim.ops) is inserted too


class RemoveArgs(Strict):
    ops: list[str] = Field(min_length=1)


@define("set_launch", SetLaunchArgs, example="{set_launch: {op: gelu, launch: {block: 256, elems_per_thread: 4}}}")
def set_launch(graph: Graph, args: SetLaunchArgs, ctx: Context) -> Graph:
    try:
        i = graph.index(args.op)
    except KeyError:
        raise ctx.error("unknown op", ".op", args.op, "an op of the workload") from None
    launch = build_launch(args.launch, dict(ctx.params), file=ctx.file, path=f"{ctx.path}.launch")
    op = graph.ops[i]
    if op.kind != "reduction":
        for key in ("threads_per_row", "rows_per_block"):
            if getattr(launch, key) is not None:
                raise ctx.error(f"'{key}' applies to reductions only", f".launch.{key}", op.kind,
                                "an op of kind reduction")
    op = op.with_(launch=launch)
    if args.passes is not None:
        if op.kind != "reduction":
            raise ctx.error("'passes' applies to reductions only", ".passes", op.kind, "an op of kind reduction")
        val = expr.evaluate_at(args.passes, ctx.params, file=ctx.file, path=f"{ctx.path}.passes")
        if val != int(val) or val < 1:
            raise ctx.error("must be a whole number >= 1", ".passes", val)
        op = op.with_(attrs=MappingProxyType({**op.attrs, "passes": int(val)}))
    ops = list(graph.ops)
    ops[i] = op
    return graph.with_ops(ops)


@define("insert", InsertArgs,
        example="{insert: {op: {name: to_contig, kind: layout, transform: contiguous, reads: [h], writes: [h]}, "
                "before: gelu}}")
def insert(graph: Graph, args: InsertArgs, ctx: Context) -> Graph:
    anchor = args.before or args.after
    assert anchor is not None
    try:
        i = graph.index(anchor)
    except KeyError:
        key = ".before" if args.before else ".after"
        raise ctx.error("unknown op", key, anchor, "an op of the workload") from None
    if any(o.name == args.op.name for o in graph.ops):
        raise ctx.error("name already used by another op", ".op.name", args.op.name)
    for t in args.op.reads + args.op.writes:
        if t not in graph.tensors:
            raise ctx.error("unknown tensor", ".op", t, "a tensor of the workload")
    anchor_op = graph.ops[i]
    new = build_op(args.op, dict(ctx.params), file=ctx.file, path=f"{ctx.path}.op", mode=anchor_op.mode)
    new = new.with_(path="inserted", region=anchor_op.region)
    ops = list(graph.ops)
    ops.insert(i if args.before else i + 1, new)
    return graph.with_ops(ops)


@define("remove", RemoveArgs, example="{remove: {ops: [dropout]}}")
def remove(graph: Graph, args: RemoveArgs, ctx: Context) -> Graph:
    names = {o.name for o in graph.ops}
    for j, n in enumerate(args.ops):
        if n not in names:
            raise ctx.error("unknown op", f".ops[{j}]", n, "an op of the workload")
    drop = set(args.ops)
    return graph.with_ops(o for o in graph.ops if o.name not in drop)
