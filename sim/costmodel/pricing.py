"""Pricing a graph: every kernel op's KernelCost on one profile (None for host-only ops), through
the run's CostCache, with measured ops taken from their trace and errors located in the file."""

from __future__ import annotations

from sim.costmodel import KernelCost
from sim.costmodel.cache import CostCache
from sim.costmodel.measured import measured_cost
from sim.errors import InfeasibleError, InputError, KernelsimError
from sim.gcpause import paused_gc
from sim.graph import Graph, Op
from sim.hardware import Hardware


def price(graph: Graph, hw: Hardware, *, measured: bool = False,
          cache: CostCache | None = None) -> tuple[KernelCost | None, ...]:
    """Kernel costs for every op (None for host-only ops).

    With `measured`, ops that carry a trace measurement (`measured_us`) use it; ops marked
    `unpriced` (imported kernels whose shapes are unknown) always do. `cache` is the run's
    CostCache (a fresh one, for this graph only, without it).
    """
    with paused_gc():
        return _price(graph, hw, measured, cache if cache is not None else CostCache())


def _price(graph: Graph, hw: Hardware, measured: bool, cache: CostCache) -> tuple[KernelCost | None, ...]:
    # Each op's signature number comes from the graph's memo in the cache (computed once per graph, and
    # once per group of ops copied from one repeat-block op: CostCache.signature_id); ops of one number
    # have one cost on this profile, looked up once per graph.
    memo = cache.signatures_of(graph)
    signature_id = cache.signature_id
    same: dict[int, KernelCost] = {}
    costs: list[KernelCost | None] = []
    for i, op in enumerate(graph.ops):
        if not op.is_kernel:
            costs.append(None)
            continue
        if "measured_us" in op.attrs and (measured or op.attrs.get("unpriced")):
            costs.append(measured_cost(op))
            continue
        sid = signature_id(i, memo)
        cost = same.get(sid)
        if cost is None:
            try:
                cost = same[sid] = cache.cost(op, graph, hw, sid)
            except InfeasibleError as exc:
                raise InfeasibleError(f"{_op_where(graph, op)} on {hw.name}: {exc}") from None
            except InputError as exc:
                if exc.file:
                    raise
                raise exc.within(file=graph.file or None, prefix=graph.op_paths.get(op.name, f"op '{op.name}'")) from None
            except KernelsimError as exc:  # a pricing error (uncosted op, bad dimensions): located in the file
                raise type(exc)(f"{_op_where(graph, op)} on {hw.name}: {exc}") from None
        costs.append(cost)
    return tuple(costs)


def _op_where(graph: Graph, op: Op) -> str:
    """`FILE: ops[3] (op 'fc1')`, or as much of it as is known (ops made by a transform have no key path)."""
    path = graph.op_paths.get(op.name)
    where = f"{path} (op '{op.name}')" if path else f"op '{op.name}'"
    return f"{graph.file}: {where}" if graph.file else where
