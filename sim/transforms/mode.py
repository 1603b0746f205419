"""mode: set the execution mode (eager, compiled, cuda_graph) of a region, of named ops, or of all.

The host costs of each mode are the engine's (per-op dispatch, per-call wrapper and
per-kernel launcher, per-graph replay). Ops given by name, or every op, become one region
so that they run as one compiled call or one graph. A CUDA graph replays kernels only: the
host ops inside the region (framework ops, autograd nodes) are removed.
"""

from __future__ import annotations

from pydantic import Field

from sim.graph import Graph
from sim.schema.scenario import Strict
from sim.schema.workload import Mode
from sim.transforms import Context, define, under


class ModeArgs(Strict):
    mode: Mode
    region: str | None = None
    ops: list[str] | None = None
    ops_under: str | None = Field(
        default=None, description="the ops whose names start with 'MODULE.' (a captured workload's module path)")
    drop_host: bool = Field(
        default=False, description="compiled: the region's host ops (framework ops, autograd nodes, module calls) "
        "are traced away, as TorchDynamo/AOTAutograd do; cuda_graph always drops them")


@define("mode", ModeArgs, example="{mode: {mode: compiled, ops: [bias, gelu, dropout]}}")
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
