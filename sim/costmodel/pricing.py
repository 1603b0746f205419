"""Pricing a graph: every kernel op's KernelCost on one profile (None for host-only ops), through
the run's CostCache, with measured ops taken from their trace and errors located in the file."""

from __future__ import annotations

from typing import Any

from sim.costmodel import KernelCost
from sim.costmodel.cache import CostCache, cost_signature
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
    # Ops copied from one repeat-block op share their attrs and launch objects (sim.workload), and
    # their tensors (renamed per iteration) have the same shapes: within this graph they have one
    # cost signature, computed once per group of such ops. A tensor is known here by the number
    # of its (shape, dtype) class; the ids are safe as keys: the graph keeps every op alive.
    classes: dict[tuple[tuple[int, ...], str], int] = {}
    shape_class = {name: classes.setdefault((t.shape, t.dtype), len(classes)) for name, t in graph.tensors.items()}
    same: dict[tuple[Any, ...], KernelCost] = {}
    signatures = cache.signatures(graph)
    costs: list[KernelCost | None] = []
    for op in graph.ops:
        if not op.is_kernel:
            costs.append(None)
            continue
        if "measured_us" in op.attrs and (measured or op.attrs.get("unpriced")):
            costs.append(measured_cost(op))
            continue
        ident = (op.kind, id(op.attrs), id(op.launch), tuple([shape_class[t] for t in op.reads]),
                 tuple([shape_class[t] for t in op.writes]), op.library)
        cost = same.get(ident)
        if cost is None:
            sig = signatures.get(ident)
            if sig is None:
                sig = signatures[ident] = cost_signature(op, graph)
            try:
                cost = same[ident] = cache.cost(op, graph, hw, sig)
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
