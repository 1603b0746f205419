"""A kernel's predicted cost (KernelCost) and the names of what can bound it (LIMITERS).

The data type the cost model produces and the engine, traces and reports read. It lives below
the cost model so that reading a Trace never imports the pricing code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

LIMITERS = ("tensor_core", "fp32", "sfu", "int", "issue", "hbm", "l2", "occupancy", "tail", "launch", "spill", "link")


@dataclass(frozen=True)
class KernelCost:
    """A kernel's predicted device time with its terms and what bounds it."""

    time_s: float
    compute_s: float
    memory_s: float
    fixed_s: float
    limiter: str
    category: str  # compute | memory | layout | comm
    hbm_bytes: float
    flops: float = 0.0
    bw_demand: float = 0.0  # share of sustained HBM bandwidth used while running alone
    sm_demand: float = 1.0  # share of SMs occupied while running alone
    detail: MappingProxyType[str, Any] = field(default_factory=lambda: MappingProxyType({}))
