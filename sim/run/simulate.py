"""Simulating one bucket's step: on one rank, or on every rank of the workload's `parallel`
layout (the critical rank's metrics, a merged trace and the `comm` block)."""

from __future__ import annotations

import functools
from typing import Any

from sim.costmodel import KernelCost
from sim.costmodel.cache import CostCache
from sim.costmodel.host import host_costs
from sim.costmodel.pricing import price
from sim.engine import simulate
from sim.graph import Graph
from sim.hardware import Hardware
from sim.metrics import StepMetrics, comm_metrics, step_metrics
from sim.ranks import merge_ranks, rank_plan, simulate_parallel
from sim.trace import Trace
from sim.workload import Workload


def run_graph(graph: Graph, hw: Hardware, cache: CostCache | None = None) -> tuple[Trace, StepMetrics]:
    trace = simulate(graph, price(graph, hw, cache=cache), host_costs(hw))
    return trace, step_metrics(trace)


def simulate_bucket(workload: Workload, graph: Graph, costs: tuple[KernelCost | None, ...], hw: Hardware,
                    params: dict[str, float], cache: CostCache | None = None,
                    ) -> tuple[Trace, StepMetrics, dict[str, Any] | None]:
    """One bucket's step: on one rank, or on every rank of the workload's `parallel` layout.

    Several ranks give the critical (slowest) rank's metrics, a merged trace (tracks
    'rank R · …') and the `comm` JSON block; one rank gives `comm` only when the graph has
    collectives.
    """
    plan = rank_plan(workload.spec.parallel, params, workload.file)
    if plan is None or plan.ranks == 1:
        trace = simulate(graph, costs, cache.host_costs(hw) if cache is not None else host_costs(hw))
        has_comm = any(o.kind == "collective" for o in graph.ops)
        return trace, step_metrics(trace), comm_result([trace], 0) if has_comm else None
    rank_traces = simulate_parallel(graph, hw, plan, functools.partial(price, cache=cache), workload.file)
    critical = max(range(len(rank_traces)), key=lambda r: (rank_traces[r].end_s, -r))
    return merge_ranks(rank_traces), step_metrics(rank_traces[critical]), comm_result(rank_traces, critical)


def comm_result(rank_traces: list[Trace], critical: int) -> dict[str, Any]:
    """The `comm` block of a bucket (docs/json.md): the critical rank's exposed communication, per collective."""
    cm = comm_metrics(rank_traces[critical])
    every = [comm_metrics(t) for t in rank_traces]
    return {
        "ranks": len(rank_traces),
        "critical_rank": critical,
        "rank_time_us": [t.end_s * 1e6 for t in rank_traces],
        "comm_time_us": cm.comm_s * 1e6,
        "exposed_comm_us": cm.exposed_s * 1e6,
        "hidden_comm_us": cm.hidden_s * 1e6,
        "rendezvous_wait_us": cm.wait_s * 1e6,
        "max_exposed_comm_us": max(c.exposed_s for c in every) * 1e6,
        "collectives": [
            {"name": c.name, "collective": c.collective, "bytes": c.bytes, "time_us": (c.end_s - c.start_s) * 1e6,
             "exposed_us": c.exposed_s * 1e6, "wait_us": c.wait_s * 1e6,
             **{k: c.args[k] for k in ("algorithm", "protocol", "channels", "ranks", "nodes", "busbw_gbps")
                if c.args.get(k) is not None}}
            for c in cm.collectives
        ],
    }
