"""dispatch: choose a path per bucket. When the predicate over the bucket's parameters holds,
the `then` transforms apply (the fast path); otherwise the `else` transforms (the fallback,
which may add layout conversions or casts). The path taken is recorded for coverage and
fallback-rate accounting."""

from __future__ import annotations

from pydantic import Field

from sim import expr
from sim.graph import Graph
from sim.schema.scenario import Strict, TransformSpec
from sim.transforms import Context, apply_all, define


class DispatchArgs(Strict):
    when: str = Field(description="predicate over the bucket's parameters: the fast path when true")
    then: list[TransformSpec] = Field(min_length=1)
    else_: list[TransformSpec] = Field(default_factory=list, alias="else")
    path: str = "fast"
    fallback_path: str = "fallback"


@define("dispatch", DispatchArgs,
        example="{dispatch: {when: 'tokens % 128 == 0', then: [{fuse: {ops: [bias, gelu], name: bg}}], else: []}}")
def dispatch(graph: Graph, args: DispatchArgs, ctx: Context) -> Graph:
    expr.check(args.when, set(ctx.params), file=ctx.file, path=f"{ctx.path}.when")
    take = bool(expr.evaluate_at(args.when, ctx.params, file=ctx.file, path=f"{ctx.path}.when"))
    if take:
        ctx.paths_taken.append(args.path)
        return apply_all(graph, list(args.then), ctx.at(".then"))
    ctx.paths_taken.append(args.fallback_path)
    return apply_all(graph, list(args.else_), ctx.at(".else"))
