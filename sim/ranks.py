"""One step on several ranks: the layout from the workload's `parallel` section, a graph,
costs and group table per rank, stragglers, and the per-rank traces merged for Perfetto."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from sim import expr
from sim.costmodel import KernelCost
from sim.costmodel.host import host_costs
from sim.engine import simulate_ranks
from sim.errors import InfeasibleError, InputError
from sim.graph import Graph
from sim.hardware import Hardware
from sim.schema.workload import Parallel
from sim.topology import Layout, Topology
from sim.trace import Interval, Trace

RANK_SEP = " · "  # merged traces name tracks "rank 3 · stream 1"


@dataclass(frozen=True)
class RankPlan:
    """The evaluated `parallel` section for one bucket."""

    layout: Layout
    slowdown: tuple[float, ...]  # per rank: kernels' time × this
    delay_s: tuple[float, ...]  # per rank: host starts this late

    @property
    def ranks(self) -> int:
        return self.layout.ranks


def _whole(spec_value: object, params: dict[str, float], file: str, path: str) -> int:
    v = expr.evaluate_at(spec_value, params, file=file, path=path)  # type: ignore[arg-type]
    if v != int(v) or v < 1:
        raise InputError("must be a whole number >= 1", file=file, path=path, value=v)
    return int(v)


def rank_plan(par: Parallel | None, params: dict[str, float], file: str) -> RankPlan | None:
    """The layout and stragglers of `par` at these parameter values; None without a `parallel` section."""
    if par is None:
        return None
    ranks = _whole(par.ranks, params, file, "parallel.ranks")
    tensor = _whole(par.tensor, params, file, "parallel.tensor")
    pipeline = _whole(par.pipeline, params, file, "parallel.pipeline")
    if par.data is None:
        if ranks % (tensor * pipeline):
            raise InputError(f"ranks must be a multiple of tensor × pipeline = {tensor * pipeline}", file=file,
                             path="parallel.ranks", value=ranks)
        data = ranks // (tensor * pipeline)
    else:
        data = _whole(par.data, params, file, "parallel.data")
    if data * tensor * pipeline != ranks:
        raise InputError(f"data × tensor × pipeline = {data * tensor * pipeline} must equal ranks", file=file,
                         path="parallel", value=ranks, expected="ranks = data × tensor × pipeline")
    slowdown = [1.0] * ranks
    delay = [0.0] * ranks
    if par.jitter is not None:
        rng = np.random.default_rng(par.jitter.seed)
        slowdown = [float(x) for x in rng.uniform(1.0, 1.0 + par.jitter.fraction, ranks)]
    for i, s in enumerate(par.stragglers):
        if s.rank >= ranks:
            raise InputError(f"rank out of range (0..{ranks - 1})", file=file, path=f"parallel.stragglers[{i}].rank",
                             value=s.rank)
        factor = expr.evaluate_at(s.slowdown, params, file=file, path=f"parallel.stragglers[{i}].slowdown")
        late_us = expr.evaluate_at(s.delay_us, params, file=file, path=f"parallel.stragglers[{i}].delay_us")
        if factor < 1.0:
            raise InputError("must be >= 1 (a straggler is slower)", file=file,
                             path=f"parallel.stragglers[{i}].slowdown", value=factor)
        if late_us < 0:
            raise InputError("must be >= 0", file=file, path=f"parallel.stragglers[{i}].delay_us", value=late_us)
        slowdown[s.rank] *= float(factor)
        delay[s.rank] += float(late_us) * 1e-6
    return RankPlan(Layout(ranks=ranks, data=data, tensor=tensor, pipeline=pipeline), tuple(slowdown), tuple(delay))


def rank_graph(graph: Graph, plan: RankPlan, topo: Topology, rank: int, file: str = "") -> tuple[Graph, list[tuple[int, ...] | None]]:
    """Rank `rank`'s graph (collectives given their group's ranks and nodes) and each op's group members."""
    ops = list(graph.ops)
    groups: list[tuple[int, ...] | None] = [None] * len(ops)
    for i, op in enumerate(ops):
        if op.kind != "collective":
            continue
        members = plan.layout.members(rank, str(op.attrs.get("group", "world")))
        if "ranks" in op.attrs and int(op.attrs["ranks"]) != len(members):
            raise InputError(f"op '{op.name}': ranks {int(op.attrs['ranks'])} differ from its group "
                             f"'{op.attrs.get('group', 'world')}' of {len(members)} ranks in the parallel layout",
                             file=file, value=op.attrs["ranks"], expected=f"{len(members)} or no `ranks`")
        attrs = dict(op.attrs)
        attrs["ranks"] = len(members)
        attrs["nodes"] = topo.nodes_spanned(members)
        ops[i] = op.with_(attrs=attrs)
        groups[i] = members
    return graph.with_ops(ops), groups


def slowed(costs: Sequence[KernelCost | None], factor: float) -> tuple[KernelCost | None, ...]:
    """A straggler's costs: every kernel but collectives takes `factor` × as long (fixed cost included)."""
    if factor == 1.0:
        return tuple(costs)
    return tuple(c if c is None or c.category == "comm" else dataclasses.replace(
        c, time_s=c.time_s * factor, compute_s=c.compute_s * factor, memory_s=c.memory_s * factor,
        fixed_s=c.fixed_s * factor, bw_demand=c.bw_demand / factor) for c in costs)


def simulate_parallel(graph: Graph, hw: Hardware, plan: RankPlan,
                      price: Callable[[Graph, Hardware], tuple[KernelCost | None, ...]], file: str = "") -> list[Trace]:
    """Simulate `graph` on every rank of `plan` over `hw`'s topology; a Trace per rank."""
    topo = hw.fabric
    if topo.declared and plan.ranks > topo.gpus_per_node * topo.nodes:
        raise InfeasibleError(f"{plan.ranks} ranks need more GPUs than {hw.name} has "
                              f"({topo.nodes} node(s) × {topo.gpus_per_node})")
    graphs, costs, groups = [], [], []
    for r in range(plan.ranks):
        g, grp = rank_graph(graph, plan, topo, r, file)
        graphs.append(g)
        costs.append(slowed(price(g, hw), plan.slowdown[r]))
        groups.append(grp)
    node_of = [topo.node_of(r) for r in range(plan.ranks)]
    return simulate_ranks(graphs, costs, [host_costs(hw)] * plan.ranks, groups, node_of, plan.delay_s)


def merge_ranks(traces: Sequence[Trace]) -> Trace:
    """One Trace whose tracks are 'rank R · host', 'rank R · stream S' (sim.report.perfetto splits them again)."""
    ivs: list[Interval] = []
    for r, t in enumerate(traces):
        ivs.extend(dataclasses.replace(iv, track=f"rank {r}{RANK_SEP}{iv.track}") for iv in t.intervals)
    ivs.sort(key=lambda iv: (iv.start_s, iv.track))
    first = traces[0]
    return Trace(graph=first.graph, hardware=first.hardware, costs=first.costs, intervals=tuple(ivs),
                 end_s=max(t.end_s for t in traces))


def split_ranks(trace: Trace) -> list[tuple[str, Trace]]:
    """The inverse of merge_ranks: [(rank label, that rank's Trace)]; a one-rank trace comes back whole."""
    by_rank: dict[str, list[Interval]] = {}
    for iv in trace.intervals:
        if not iv.track.startswith("rank ") or RANK_SEP not in iv.track:
            return [("", trace)]
        label, track = iv.track.split(RANK_SEP, 1)
        by_rank.setdefault(label, []).append(dataclasses.replace(iv, track=track))
    order = sorted(by_rank, key=lambda s: int(s.split()[1]))
    return [(label, trace.with_intervals(by_rank[label])) for label in order]


__all__ = ["RANK_SEP", "RankPlan", "merge_ranks", "rank_graph", "rank_plan", "simulate_parallel", "split_ranks"]
