"""swap: run ops on another library (a GEMM or attention implementation with its own
efficiency in the hardware profile's `libraries` section)."""

from __future__ import annotations

from pydantic import model_validator

from sim.graph import Graph
from sim.schema.scenario import Strict
from sim.transforms import Context, define


class SwapArgs(Strict):
    """Run ops on another library implementation (its efficiency comes from the profile's `libraries`)."""

    ops: list[str] | None = None
    kind: str | None = None
    library: str

    @model_validator(mode="after")
    def _target(self) -> SwapArgs:
        if (self.ops is None) == (self.kind is None):
            raise ValueError("give exactly one of 'ops' or 'kind'")
        return self


@define("swap", SwapArgs, example="{swap: {kind: gemm, library: cutlass}}")
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
