"""mode: set the execution mode (eager, compiled, cuda_graph) of a region, of named ops, or of all.

The host costs of each mode are the engine's (per-op dispatch, per-call wrapper and
per-kernel launcher, per-graph replay). Ops given by name, or every op, become one region
so that they run as one compiled call or one graph. A CUDA graph replays kernels only: the
host ops inside the region (framework ops, autograd nodes) are removed.
"""

from __future__ import annotations

from sim.graph import Graph
from sim.schema.scenario import ModeArgs
from sim.transforms import Context, register, under


@register("mode")
def set_mode(graph: Graph, args: ModeArgs, ctx: Context) -> Graph:
    names = {o.name for o in graph.ops}
    if args.ops is not None:
        for j, n in enumerate(args.ops):
            if n not in names:
                raise ctx.error("unknown op", f".ops[{j}]", n, "an op of the workload")
    if args.region is not None and not any(o.region == args.region for o in graph.ops):
        regions = sorted({o.region for o in graph.ops if o.region})
        raise ctx.error("no op is in this region", ".region", args.region, "one of: " + (", ".join(regions) or "none declared"))
    selected = set(args.ops) if args.ops is not None else None
    if args.ops_under is not None:
        picked = {o.name for o in graph.ops if under(o.name, args.ops_under)}
        if not picked:
            raise ctx.error("no op is under this module path", ".ops_under", args.ops_under,
                            "a prefix of op names (MODULE.)")
        selected = picked if selected is None else selected & picked
    if args.region is not None:
        region_label: str | None = args.region
    elif args.ops_under is not None:
        region_label = f"{args.mode}:{args.ops_under}"
    elif args.ops is not None:
        region_label = f"{args.mode}:{'+'.join(args.ops)}"
    else:
        region_label = args.mode  # the whole step is one compiled call / one graph
    out = []
    for o in graph.ops:
        hit = (selected is None or o.name in selected) and (args.region is None or o.region == args.region)
        if hit and o.kind == "host" and (args.mode == "cuda_graph" or args.drop_host):
            continue  # a graph replay (or a traced compiled region) runs no framework code for these
        if hit and o.kind != "sync":
            o = o.with_(mode=args.mode, region=region_label)
        out.append(o)
    return graph.with_ops(out)
