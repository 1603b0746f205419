"""Kernel costs memoized per run: `cost_signature` (everything a cost function reads) and the
`CostCache` a run, a sweep worker or a serving pricer owns (never module-global)."""

from __future__ import annotations

from typing import Any

from sim.costmodel import KernelCost, kernel_cost
from sim.costmodel.host import HostCosts, host_costs
from sim.graph import Graph, Op
from sim.hardware import Hardware


def cost_signature(op: Op, graph: Graph) -> tuple[Any, ...]:
    """Everything a cost function reads: kind, attributes, launch config, read and written shapes, library."""
    return (
        op.kind,
        tuple(sorted((k, str(v)) for k, v in op.attrs.items())),
        op.launch,
        tuple((graph.tensors[t].shape, graph.tensors[t].dtype) for t in op.reads),
        tuple((graph.tensors[t].shape, graph.tensors[t].dtype) for t in op.writes),
        op.library,
    )


class CostCache:
    """Kernel costs memoized by (hardware, cost_signature), owned by whoever runs: a scenario run, a
    sweep worker (shared by its points), a serving pricer. Never module-global.

    Costs are pure functions of (op signature, hardware): a step repeats the same layers and a
    sweep prices the same ops on the same profile over and over. The hardware part of the key is
    the profile's full repr (every number), so profiles that differ anywhere never share entries;
    it is computed once per Hardware object (kept alive here, so its id is never reused). Errors
    are raised each time, never cached.
    """

    def __init__(self, max_entries: int = 200_000) -> None:
        self.max_entries = max_entries
        self._costs: dict[tuple[str, tuple[Any, ...]], KernelCost] = {}
        self._hw_keys: dict[int, tuple[Hardware, str]] = {}
        self._host: dict[int, tuple[Hardware, HostCosts]] = {}  # per profile (held: its id is not reused)
        # Per graph (held, so its id is not reused): op identity -> cost_signature, for a graph
        # priced on several profiles (a run's hardware list, sweep points sharing a GraphCache).
        self._signatures: dict[int, tuple[Graph, dict[tuple[Any, ...], tuple[Any, ...]]]] = {}

    def __len__(self) -> int:
        return len(self._costs)

    def host_costs(self, hw: Hardware) -> HostCosts:
        """host_costs(hw), one object per profile: its eager-dispatch memo (HostCosts.dispatch_prices)
        serves every simulation on that profile (the same declarations, in other buckets and points)."""
        entry = self._host.get(id(hw))
        if entry is None or entry[0] is not hw:
            if len(self._host) >= 256:
                self._host.clear()
            entry = self._host[id(hw)] = (hw, host_costs(hw))
        return entry[1]

    def hardware_key(self, hw: Hardware) -> str:
        entry = self._hw_keys.get(id(hw))
        if entry is None or entry[0] is not hw:
            if len(self._hw_keys) >= 256:
                self._hw_keys.clear()
            entry = self._hw_keys[id(hw)] = (hw, repr(hw))
        return entry[1]

    def signatures(self, graph: Graph) -> dict[tuple[Any, ...], tuple[Any, ...]]:
        """The memo of `graph`'s cost signatures by op identity (see price)."""
        hit = self._signatures.get(id(graph))
        if hit is None or hit[0] is not graph:
            if len(self._signatures) >= 1024:
                self._signatures.clear()
            hit = self._signatures[id(graph)] = (graph, {})
        return hit[1]

    def cost(self, op: Op, graph: Graph, hw: Hardware, signature: tuple[Any, ...] | None = None) -> KernelCost:
        """kernel_cost(op, graph, hw), computed once per (hardware, cost_signature)."""
        key = (self.hardware_key(hw), signature if signature is not None else cost_signature(op, graph))
        cost = self._costs.get(key)
        if cost is None:
            cost = kernel_cost(op, graph, hw)
            if len(self._costs) >= self.max_entries:
                self._costs.clear()
            self._costs[key] = cost
        return cost
