"""specialize: a kernel variant for the shapes that satisfy a predicate.

The specialized kernel may have its own launch config, run a padded (aligned) GEMM shape
— paying a real copy that pads the operand — or carry a throughput scale you estimate.
Buckets where the predicate fails keep the default kernel (and count as fallback).
"""

from __future__ import annotations

from types import MappingProxyType

from pydantic import Field

from sim import expr
from sim.graph import Graph, Op, Tensor
from sim.schema.scenario import Strict
from sim.schema.workload import Expr, Launch
from sim.transforms import Context, define
from sim.workload import build_launch


class SpecializeArgs(Strict):
    """A kernel variant for the buckets where `when` holds; other buckets keep the default path."""

    op: str
    when: str = "True"
    launch: Launch | None = None
    pad: dict[str, Expr] = Field(
        default_factory=dict,
        description="GEMM dims to pad, e.g. {k: 'round_up(k, 64)'}: the kernel runs the padded shape and a copy pads the operand",
    )
    efficiency: float | None = Field(default=None, gt=0, description="throughput scale vs the default kernel (an estimate you give)")
    library: str | None = None
    path: str = "specialized"


@define("specialize", SpecializeArgs, example="{specialize: {op: fc1, when: 'tokens <= 512', pad: {k: 'round_up(k, 64)'}}}")
def specialize(graph: Graph, args: SpecializeArgs, ctx: Context) -> Graph:
    try:
        i = graph.index(args.op)
    except KeyError:
        raise ctx.error("unknown op", ".op", args.op, "an op of the workload") from None
    expr.check(args.when, set(ctx.params), file=ctx.file, path=f"{ctx.path}.when")
    if not expr.evaluate_at(args.when, ctx.params, file=ctx.file, path=f"{ctx.path}.when"):
        ctx.paths_taken.append("fallback")
        return graph
    ctx.paths_taken.append(args.path)
    op = graph.ops[i]
    attrs = dict(op.attrs)
    changes: dict[str, object] = {"path": args.path}
    new_ops: list[Op] = []
    tensors = dict(graph.tensors)
    if args.pad:
        if op.kind != "gemm":
            raise ctx.error("only GEMM dimensions can be padded", ".pad", op.kind, "a gemm op")
        env = {**ctx.params, "m": attrs["m"], "n": attrs["n"], "k": attrs["k"]}
        for dim, raw in args.pad.items():
            if dim not in ("m", "n", "k"):
                raise ctx.error("unknown GEMM dimension", f".pad.{dim}", dim, "m, n or k")
            val = expr.evaluate_at(raw, env, file=ctx.file, path=f"{ctx.path}.pad.{dim}")
            if val < attrs[dim]:
                raise ctx.error("padding cannot shrink a dimension", f".pad.{dim}", val, f">= {attrs[dim]}")
            attrs[dim] = int(val)
        # The padded operand is written once by a copy kernel before the GEMM.
        src = op.reads[0] if op.reads else None
        if src is not None and (attrs["m"], attrs["n"], attrs["k"]) != (op.attrs["m"], op.attrs["n"], op.attrs["k"]):
            padded = f"{src}__padded"
            item = graph.tensors[src].dtype
            tensors[padded] = Tensor(padded, (int(attrs["m"]), int(attrs["k"])), item)
            new_ops.append(Op(name=f"{op.name}__pad", kind="layout", reads=(src,), writes=(padded,),
                              stream=op.stream, phase=op.phase, region=op.region, mode=op.mode,
                              attrs=MappingProxyType({"transform": "contiguous"}), path=args.path))
            changes["reads"] = (padded, *op.reads[1:])
    if args.efficiency is not None:
        attrs["efficiency_scale"] = args.efficiency
    changes["attrs"] = attrs
    if args.launch is not None:
        changes["launch"] = build_launch(args.launch, dict(ctx.params), file=ctx.file, path=f"{ctx.path}.launch")
    if args.library is not None:
        changes["library"] = args.library
    ops = list(graph.ops)
    ops[i] = op.with_(**changes)
    ops[i:i] = new_ops
    return graph.with_ops(ops, tensors)
