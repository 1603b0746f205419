"""relayout: keep a tensor in another layout. A conversion kernel (a real layout op with its
own cost) runs after the tensor's last producer; the named consumers read the converted copy."""

from __future__ import annotations

from types import MappingProxyType
from typing import Literal

from pydantic import Field

from sim.graph import Graph, Op, Tensor
from sim.schema.scenario import Strict
from sim.transforms import Context, define


class RelayoutArgs(Strict):
    """Store `tensor` in another layout: a conversion kernel after its producer, and its consumers read the
    converted copy (or, with `consumers_native`, consumers that understand the new layout read it directly)."""

    tensor: str = Field(description="the tensor to store in another layout")
    conversion: Literal["transpose", "contiguous", "nchw_to_nhwc", "nhwc_to_nchw", "cast"] = Field(
        default="transpose", description="the conversion kernel")
    consumers: list[str] = Field(min_length=1, description="ops that read the converted copy")
    name: str | None = Field(default=None, description="the conversion op's name")


@define("relayout", RelayoutArgs, example="{relayout: {tensor: h, conversion: transpose, consumers: [fc2]}}")
def relayout(graph: Graph, args: RelayoutArgs, ctx: Context) -> Graph:
    if args.tensor not in graph.tensors:
        raise ctx.error("unknown tensor", ".tensor", args.tensor, "a tensor of the workload")
    index = {o.name: i for i, o in enumerate(graph.ops)}
    for j, n in enumerate(args.consumers):
        if n not in index:
            raise ctx.error("unknown op", f".consumers[{j}]", n, "an op of the workload")
        if args.tensor not in graph.ops[index[n]].reads:
            raise ctx.error(f"op '{n}' does not read '{args.tensor}'", f".consumers[{j}]", n)
    first_consumer = min(index[n] for n in args.consumers)
    writers = [i for i in graph.writers().get(args.tensor, []) if i < first_consumer]
    at = (writers[-1] + 1) if writers else 0
    src = graph.tensors[args.tensor]
    converted = f"{args.tensor}__{args.conversion}"
    dtype = src.dtype
    shape = tuple(reversed(src.shape)) if args.conversion == "transpose" else src.shape
    tensors = dict(graph.tensors)
    tensors[converted] = Tensor(converted, shape, dtype)
    anchor = graph.ops[min(at, len(graph.ops) - 1)]
    conv = Op(name=args.name or f"{args.tensor}__to_{args.conversion}", kind="layout", reads=(args.tensor,),
              writes=(converted,), stream=anchor.stream, phase=anchor.phase, region=anchor.region, mode=anchor.mode,
              attrs=MappingProxyType({"transform": args.conversion}), path="relayout")
    if conv.name in index:
        raise ctx.error("name already used by another op", ".name", conv.name)
    consumers = set(args.consumers)
    ops = [o.with_(reads=tuple(converted if t == args.tensor else t for t in o.reads)) if o.name in consumers else o
           for o in graph.ops]
    ops.insert(at, conv)
    return graph.with_ops(ops, tensors)
