"""swap: run ops on another library (a GEMM or attention implementation with its own
efficiency in the hardware profile's `libraries` section)."""

from __future__ import annotations

from sim.graph import Graph
from sim.schema.scenario import SwapArgs
from sim.transforms import Context, register


@register("swap")
def swap(graph: Graph, args: SwapArgs, ctx: Context) -> Graph:
    names = {o.name for o in graph.ops}
    if args.ops is not None:
        for j, n in enumerate(args.ops):
            if n not in names:
                raise ctx.error("unknown op", f".ops[{j}]", n, "an op of the workload")
        chosen = set(args.ops)
    else:
        chosen = {o.name for o in graph.ops if o.kind == args.kind}
        if not chosen:
            raise ctx.error("no op of this kind", ".kind", args.kind)
    return graph.with_ops(o.with_(library=args.library, path="swapped") if o.name in chosen else o for o in graph.ops)
