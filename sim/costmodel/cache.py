"""Kernel costs memoized per run: `cost_signature` (everything a cost function reads) and the
`CostCache` a run, a sweep worker or a serving pricer owns (never module-global)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

from sim.costmodel import KernelCost, kernel_cost
from sim.costmodel.host import HostCosts, host_costs
from sim.graph import Graph, Op
from sim.hardware import Hardware

K = TypeVar("K")
V = TypeVar("V")


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


class ByObject(Generic[K, V]):
    """`make(obj)`, computed once per object and found by its id. Each entry holds its object, so
    while the entry exists no other object can take that id (an entry never answers for another
    object); past `max_entries` objects the memo starts afresh."""

    __slots__ = ("make", "max_entries", "_entries")

    def __init__(self, make: Callable[[K], V], max_entries: int = 256) -> None:
        self.make = make
        self.max_entries = max_entries
        self._entries: dict[int, tuple[K, V]] = {}

    def __call__(self, obj: K) -> V:
        entry = self._entries.get(id(obj))
        if entry is None or entry[0] is not obj:
            if len(self._entries) >= self.max_entries:
                self._entries.clear()
            entry = self._entries[id(obj)] = (obj, self.make(obj))
        return entry[1]

    def clear(self) -> None:
        self._entries.clear()


class GraphSignatures:
    """One graph's cost signatures, as the numbers CostCache gives them (equal signatures, one number):
    found by op identity (kind, attrs and launch objects, the (shape, dtype) classes of its tensors,
    library), so the ops copied from one repeat-block op (sharing their attrs and launch objects, their
    tensors of the same shapes) compute theirs once. The ids are safe as keys: the graph keeps every op
    alive, and the CostCache holds the graph while this memo exists."""

    __slots__ = ("graph", "shape_class", "by_ident", "by_index")

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        classes: dict[tuple[tuple[int, ...], str], int] = {}
        self.shape_class = {name: classes.setdefault((t.shape, t.dtype), len(classes))
                            for name, t in graph.tensors.items()}
        self.by_ident: dict[tuple[Any, ...], int] = {}
        self.by_index: list[int | None] = [None] * len(graph.ops)  # op position -> its signature's number


class CostCache:
    """Kernel costs memoized by (hardware, cost_signature), owned by whoever runs: a scenario run, a
    sweep worker (shared by its points), a serving pricer. Never module-global.

    Costs are pure functions of (op signature, hardware): a step repeats the same layers and a
    sweep prices the same ops on the same profile over and over. The hardware part of the key is
    the profile's full repr (every number), so profiles that differ anywhere never share entries;
    it is computed once per Hardware object (kept alive here, so its id is never reused). Errors
    are raised each time, never cached. Signatures are interned: each distinct one gets a number
    (signature_id), which the cost table is keyed by, so a lookup hashes an int, not the nested tuple.
    """

    def __init__(self, max_entries: int = 200_000) -> None:
        self.max_entries = max_entries
        self._costs: dict[tuple[str, int], KernelCost] = {}
        self._ids: dict[tuple[Any, ...], int] = {}  # interned signatures: signature -> its number
        self._signatures: list[tuple[Any, ...]] = []  # number -> signature
        self.hardware_key: ByObject[Hardware, str] = ByObject(repr)
        # host_costs(hw), one object per profile: its memos (HostCosts.dispatch_prices, host_op_prices)
        # serve every simulation on that profile (the same declarations, in other buckets and points)
        self.host_costs: ByObject[Hardware, HostCosts] = ByObject(host_costs)
        # Per graph: its ops' signature numbers, for a graph priced on several profiles (a run's hardware
        # list, sweep points sharing a GraphCache) and for GraphCache.op_signatures (micro gains).
        self.graph_signatures: ByObject[Graph, GraphSignatures] = ByObject(GraphSignatures, 1024)

    def __len__(self) -> int:
        return len(self._costs)

    def signatures_of(self, graph: Graph) -> GraphSignatures:
        """The memo of `graph`'s signature numbers (signature_id). Where the interned signatures have
        grown past max_entries, every number is dropped first (with the costs and the graphs' memos
        keyed by them): only here, so the numbers never change while one graph is priced."""
        if len(self._ids) >= self.max_entries:
            self._ids.clear()
            self._signatures.clear()
            self._costs.clear()
            self.graph_signatures.clear()
        return self.graph_signatures(graph)

    def signature_id(self, op_index: int, memo: GraphSignatures) -> int:
        """The number of the cost_signature of op `op_index` of the graph of `memo` (signatures_of)."""
        sid = memo.by_index[op_index]
        if sid is not None:
            return sid
        graph = memo.graph
        op = graph.ops[op_index]
        sc = memo.shape_class
        ident = (op.kind, id(op.attrs), id(op.launch), tuple([sc[t] for t in op.reads]),
                 tuple([sc[t] for t in op.writes]), op.library)
        sid = memo.by_ident.get(ident)
        if sid is None:
            sid = memo.by_ident[ident] = self._intern(cost_signature(op, graph))
        memo.by_index[op_index] = sid
        return sid

    def _intern(self, sig: tuple[Any, ...]) -> int:
        sid = self._ids.get(sig)
        if sid is None:
            sid = self._ids[sig] = len(self._signatures)
            self._signatures.append(sig)
        return sid

    def signature(self, sid: int) -> tuple[Any, ...]:
        """The cost_signature numbered `sid` (signature_id)."""
        return self._signatures[sid]

    def op_signatures(self, graph: Graph) -> list[tuple[Any, ...]]:
        """Every op's cost_signature (the interned tuple), in op order."""
        memo = self.signatures_of(graph)
        return [self._signatures[self.signature_id(i, memo)] for i in range(len(graph.ops))]

    def cost(self, op: Op, graph: Graph, hw: Hardware, signature: int | None = None) -> KernelCost:
        """kernel_cost(op, graph, hw), computed once per (hardware, cost_signature); `signature`: its
        number (signature_id), computed here without it."""
        if signature is None:
            signature = self._intern(cost_signature(op, graph))
        key = (self.hardware_key(hw), signature)
        cost = self._costs.get(key)
        if cost is None:
            cost = kernel_cost(op, graph, hw)
            if len(self._costs) >= self.max_entries:
                self._costs.clear()
            self._costs[key] = cost
        return cost
