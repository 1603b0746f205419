"""fuse: replace a set of elementwise (and at most one reduction) ops by one kernel.

Intermediates written and read only inside the set no longer go to HBM; tensors read
after the set stay outputs, except `drop_saved` ones (their readers must recompute them,
paying `recompute_math` per element in the kernel that does). Math per element is
carried over (weighted by each member's element count), so SFU and RNG work stays.
The fused op takes the place of the last member; an op between members that reads a
member's output would run before its input exists: that fusion is refused.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Literal

from pydantic import Field, model_validator

from sim import expr
from sim.graph import Graph, Op
from sim.schema.scenario import Strict
from sim.schema.workload import Expr, Launch
from sim.transforms import Context, define, under
from sim.workload import build_launch


class FuseArgs(Strict):
    ops: list[str] = Field(default_factory=list, description="the ops to fuse (two or more), or use ops_under")
    ops_under: str | None = Field(
        default=None, description="fuse the elementwise and reduction ops whose names start with 'MODULE.' (captured "
        "workloads name ops by module path: docs/capture.md); `phase` narrows it")
    phase: Literal["forward", "backward", "optimizer", "other"] | None = Field(
        default=None, description="with ops_under: only ops of this phase")
    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_.]*$")
    launch: Launch | None = None
    library: str = "triton"
    drop_saved: list[str] = Field(
        default_factory=list,
        description="tensors the fused kernel no longer writes; later readers must recompute them",
    )
    recompute: list[str] = Field(
        default_factory=list, description="tensors the fused kernel recomputes instead of reading them"
    )
    math: dict[str, Expr] | None = Field(
        default=None,
        description="the fused kernel's own math per element (e.g. its RNG differs from the library's); "
        "default: the members' math, weighted by their element counts",
    )
    extra_reads: list[str] = Field(
        default_factory=list, description="tensors the fused kernel reads to recompute what was dropped"
    )
    recompute_math: dict[str, Expr] = Field(
        default_factory=dict, description="extra math per element the fused kernel does to recompute dropped tensors"
    )
    passes: Expr | None = Field(
        default=None, description="sweeps over each row of the fused reduction (default: the reduction's own; e.g. 1"
        " for a one-pass add+LayerNorm that keeps its row in registers)")

    @model_validator(mode="after")
    def _ops_or_under(self) -> FuseArgs:
        if self.ops_under is None and len(self.ops) < 2:
            raise ValueError("fuse needs 'ops' (two or more op names) or 'ops_under' (a module path)")
        if self.ops_under is not None and self.ops:
            raise ValueError("fuse takes 'ops' or 'ops_under', not both")
        if self.phase is not None and self.ops_under is None:
            raise ValueError("'phase' selects among 'ops_under' ops; it needs 'ops_under'")
        return self


FUSABLE = {"elementwise", "reduction"}


@define("fuse", FuseArgs,
        example="{fuse: {ops: [bias, gelu, dropout], name: bgd, launch: {block: 128, elems_per_thread: 8}}}")
def fuse(graph: Graph, args: FuseArgs, ctx: Context) -> Graph:
    if args.ops_under is not None:
        picked = [o.name for o in graph.ops if under(o.name, args.ops_under) and o.kind in FUSABLE
                  and (args.phase is None or o.phase == args.phase)]
        if len(picked) < 2:
            raise ctx.error(f"selects {len(picked)} elementwise/reduction op(s){f' in phase {args.phase}' if args.phase else ''}",
                            ".ops_under", args.ops_under, "a module path with two or more fusable ops under it")
        args = args.model_copy(update={"ops": picked})
    index = {o.name: i for i, o in enumerate(graph.ops)}
    for j, name in enumerate(args.ops):
        if name not in index:
            raise ctx.error("unknown op", f".ops[{j}]", name, "an op of the workload (after earlier transforms)")
    if args.name in index and args.name not in args.ops:
        raise ctx.error("name already used by another op", ".name", args.name)
    members = sorted(index[n] for n in set(args.ops))
    ops = [graph.ops[i] for i in members]
    for o in ops:
        if o.kind not in FUSABLE:
            raise ctx.error(
                f"cannot fuse op '{o.name}' of kind '{o.kind}'", ".ops", o.name,
                "elementwise ops and at most one reduction",
            )
    for o in ops:
        if "launch_share" in o.attrs:
            raise ctx.error(f"op '{o.name}' is one of several kernels of one framework op (launches)", ".ops",
                            o.name, "ops that launch one kernel each")
    if sum(o.kind == "reduction" for o in ops) > 1:
        raise ctx.error("at most one reduction can be fused", ".ops", args.ops)
    if len({o.stream for o in ops}) > 1:
        raise ctx.error("ops on different streams cannot be fused", ".ops", args.ops)
    member_set = set(members)
    produced = {t for o in ops for t in o.writes}
    first, last = members[0], members[-1]
    between = [graph.ops[i] for i in range(first + 1, last) if i not in member_set]
    # At the last member's place, no op in between may read what the fusion produces;
    # at the first member's place, no op in between may produce what a member reads.
    needs_inside = [(b, t) for b in between for t in b.reads if t in produced]
    member_inputs = {t for o in ops for t in o.reads} - produced
    feeds_members = [(b, t) for b in between for t in b.writes if t in member_inputs]
    if not needs_inside:
        place = last
    elif not feeds_members:
        place = first
    else:
        b, t = needs_inside[0]
        raise ctx.error(
            f"op '{b.name}' between the fused ops reads '{t}' produced inside the fusion, and"
            f" '{feeds_members[0][0].name}' produces '{feeds_members[0][1]}' that the fusion reads:"
            " fusing would create a cycle",
            ".ops",
            args.ops,
            "ops adjacent in the dependency graph",
        )
    outside_reads = {t for i, o in enumerate(graph.ops) if i not in member_set for t in o.reads}
    reads: list[str] = []
    for o in ops:
        for t in o.reads:
            if t not in produced and t not in reads:
                reads.append(t)
    for j, t in enumerate(args.recompute):
        if t not in reads:
            raise ctx.error("the fused ops do not read this tensor", f".recompute[{j}]", t, "one of: " + ", ".join(reads))
        reads.remove(t)
    for j, t in enumerate(args.extra_reads):
        if t not in graph.tensors:
            raise ctx.error("unknown tensor", f".extra_reads[{j}]", t, "a tensor of the workload")
        if t not in reads:
            reads.append(t)
    for j, t in enumerate(args.drop_saved):
        if t not in produced:
            raise ctx.error("not written by the fused ops", f".drop_saved[{j}]", t)
    writes = [t for o in ops for t in o.writes if t in outside_reads and t not in args.drop_saved]
    if not writes:
        # Final outputs nobody reads inside this graph still get written once.
        writes = [t for t in ops[-1].writes if t not in args.drop_saved] or [ops[-1].writes[0]]
    red = next((o for o in ops if o.kind == "reduction"), None)
    numels = []
    for o in ops:
        if "numel" in o.attrs:
            numels.append(int(o.attrs["numel"]))
        elif o.kind == "reduction":
            numels.append(int(o.attrs["rows"]) * int(o.attrs["cols"]))
        else:
            t = (o.writes or o.reads)[0]
            numels.append(graph.tensors[t].numel)
    numel = max(numels)
    math: dict[str, float] = {}
    if args.math is not None:
        for name, raw in args.math.items():
            math[name] = float(expr.evaluate_at(raw, ctx.params, file=ctx.file, path=f"{ctx.path}.math.{name}"))
    else:
        for o, n in zip(ops, numels, strict=True):
            for name, count in o.attrs.get("math", {}).items():
                math[name] = math.get(name, 0.0) + count * n / numel
    for name, raw in args.recompute_math.items():
        val = expr.evaluate_at(raw, ctx.params, file=ctx.file, path=f"{ctx.path}.recompute_math.{name}")
        math[name] = math.get(name, 0.0) + float(val)
    attrs: dict[str, object] = {"math": MappingProxyType(math)}
    if args.passes is not None and red is None:
        raise ctx.error("'passes' needs a reduction among the fused ops", ".passes", args.passes)
    if red is not None:
        passes = red.attrs.get("passes", 1)
        if args.passes is not None:
            where = f"{ctx.path}.passes"
            val = expr.evaluate_at(args.passes, ctx.params, file=ctx.file, path=where)
            if val != int(val) or val < 1:
                raise ctx.error("must be a whole number >= 1", ".passes", val)
            passes = int(val)
        attrs.update(rows=red.attrs["rows"], cols=red.attrs["cols"], passes=passes)
        for key in ("axis", "threads_per_row"):
            if key in red.attrs:
                attrs[key] = red.attrs[key]
    else:
        attrs["numel"] = numel
    launch = build_launch(args.launch, dict(ctx.params), file=ctx.file, path=f"{ctx.path}.launch")
    after = tuple(dict.fromkeys(a for o in ops for a in o.after if a not in args.ops))
    fused = Op(
        name=args.name,
        kind="reduction" if red is not None else "elementwise",
        reads=tuple(reads),
        writes=tuple(writes),
        stream=ops[0].stream,
        after=after,
        phase=ops[-1].phase,
        region=ops[-1].region,
        mode=ops[-1].mode,
        library=args.library,
        launch=launch,
        attrs=MappingProxyType(attrs),
        path="fused",
        replaces=tuple(n for o in ops for n in (o.replaces or (o.name,))),
    )
    # Only the ops that change are rebuilt: the fused op in its place, and ops whose `after`
    # names a member (now the fused op; repeated names collapse). Every other op is kept as it is.
    renamed = {o.name: args.name for o in ops}
    out: list[Op] = []
    for i, o in enumerate(graph.ops):
        if i == place:
            o = fused
        elif i in member_set:
            continue
        if o.after and (any(a in renamed for a in o.after) or len(set(o.after)) < len(o.after)):
            o = o.with_(after=tuple(dict.fromkeys(renamed.get(a, a) for a in o.after)))
        out.append(o)
    return graph.with_ops(out)
