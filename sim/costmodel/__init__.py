"""Cost model: pure functions (op, graph, hardware) → KernelCost. One registry, one file per family.

No simpy, no torch here. An op kind with no cost function raises UncostedOpError. The op kinds
(sim/ops/) register their cost functions, which live in this package's family files, through
`sim.ops.define`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from sim.errors import UncostedOpError
from sim.graph import Graph, Op
from sim.hardware import Hardware
from sim.kernelcost import LIMITERS, KernelCost

CostFn = Callable[[Op, Graph, Hardware], KernelCost]
_REGISTRY: dict[str, CostFn] = {}


def register(kind: str) -> Callable[[CostFn], CostFn]:
    """Register the cost function of an op kind; registering a kind twice is an error."""

    def deco(fn: CostFn) -> CostFn:
        if kind in _REGISTRY:
            raise ValueError(f"cost function for op kind {kind!r} is already registered ({_REGISTRY[kind].__name__})")
        _REGISTRY[kind] = fn
        return fn

    return deco


__all__ = ["LIMITERS", "CostFn", "KernelCost", "kernel_cost", "register", "registered_kinds"]


def registered_kinds() -> tuple[str, ...]:
    return tuple(sorted(_REGISTRY))


DEFAULT_LIBRARIES = frozenset({"torch", "cublas", "triton", "default"})


def kernel_cost(op: Op, graph: Graph, hw: Hardware) -> KernelCost:
    """Price one kernel op on one hardware profile.

    A specialized kernel's `efficiency_scale` and another library's throughput (from the
    profile's `libraries`) scale the kernel's body; its fixed cost stays.
    """
    fn = _REGISTRY.get(op.kind)
    if fn is None:
        raise UncostedOpError(f"op '{op.name}' of kind '{op.kind}' has no cost function (known: {', '.join(registered_kinds())})")
    cost = fn(op, graph, hw)
    scale = float(op.attrs.get("efficiency_scale", 1.0))
    if op.library not in DEFAULT_LIBRARIES:
        lib = hw.libraries.get(op.library)
        if lib is None or op.kind not in lib:
            raise UncostedOpError(
                f"op '{op.name}': library '{op.library}' has no {op.kind} efficiency in hardware profile '{hw.name}'"
                f" (libraries: {', '.join(sorted(hw.libraries)) or 'none'})"
            )
        scale *= lib[op.kind]
    if scale != 1.0:
        body = (cost.time_s - cost.fixed_s) / scale
        cost = replace(cost, time_s=cost.fixed_s + body, compute_s=cost.compute_s / scale, memory_s=cost.memory_s / scale,
                       bw_demand=min(1.0, cost.bw_demand * scale))
    return cost

