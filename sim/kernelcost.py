"""A kernel's predicted cost (KernelCost) and the names of what can bound it (LIMITERS).

The data type the cost model produces and the engine, traces and reports read. It lives below
the cost model so that reading a Trace never imports the pricing code.
"""

from __future__ import annotations

import heapq
import math
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


def rounds_beside(units: float, sm_count: int, free_sms: float) -> float:
    """How much longer than alone a persistent kernel of `units` equal work units (a GEMM's output
    tiles x its K splits) runs when only `free_sms` of `sm_count` SMs are free for it.

    Its grid is fixed at launch: one CTA per SM, or one per unit when there are fewer (cuBLAS's
    persistent Hopper kernels: grid 2 x 66 on 132 SMs, 384 threads x 168 registers, one CTA per SM).
    Alone each CTA runs ceil(units / grid) units. Beside a resident collective the CTAs that find no
    free SM are left out; their units are done by the resident CTAs after their own, one more
    round per free SM's worth: rounds = own + ceil(left-out units / free SMs). So one lost SM costs a
    whole round (measured: 4096^3 bf16, 4 rounds alone, x1.25 beside one NCCL CTA or one spin kernel;
    2048^3, 128 CTAs, x1.0 beside 1-4 and x1.8-1.9 beside 8-24), where the SM share would say 1 %.
    With no CTA left out it costs nothing; the value is then units / free SMs when the kernel is less
    than one wave (its demand on the free SMs, so that kernels sharing the GPU add up), else 1."""
    if units <= 0 or sm_count <= 0:
        return 0.0
    free = max(1.0, math.floor(free_sms + 1e-9))
    grid = min(units, float(sm_count))
    if free >= grid:
        return min(1.0, units / free)
    per_cta = units / grid
    own = math.ceil(per_cta - 1e-9)
    return (own + math.ceil((grid - free) * per_cta / free - 1e-9)) / own


def _left_out_grid(units: float, sm_count: int, free_sms: float, alone_s: float,
                   released_after_s: float) -> tuple[int, int, int, float] | None:
    """A persistent kernel's grid when it starts with CTAs left out: (units, grid, CTAs that found a free
    SM, one unit's time); None when none is left out or nothing is released later (it runs as alone)."""
    n_units = max(1, int(round(units)))
    grid = min(n_units, sm_count)
    free = min(grid, max(1, math.floor(free_sms + 1e-9)))
    if free >= grid or released_after_s <= 0:
        return None
    return n_units, grid, free, alone_s / math.ceil(n_units / grid - 1e-9)


def release_loss(units: float, sm_count: int, free_sms: float, alone_s: float, released_after_s: float,
                 loss_units: float) -> float:
    """How long a persistent kernel of `units` equal work units (a GEMM's output tiles x K splits) that
    takes `alone_s` alone runs when it starts with only `free_sms` of `sm_count` SMs free and gets the
    others `released_after_s` later (math.inf: never while it runs), in the measured form: it loses
    `loss_units` of its units' time (alone_s / ceil(units / grid)) times min(released_after_s / alone_s, 1).

    Measured (sim.calibrate.gpu.gemm_release, sim.calibrate.gemm_release_fit): a cuBLAS GEMM beside spin
    kernels that hold 8 or 24 SMs and end part-way loses about linearly in how long they stay, up to
    1.4-1.9 unit times when they stay throughout — the same with 8 or 24 SMs held, so neither the SM
    share nor a tile queue over the SMs left (release_beside) describes it. With no CTA left out (a grid
    within the free SMs) it costs nothing."""
    if units <= 0 or alone_s <= 0:
        return max(alone_s, 0.0)
    left_out = _left_out_grid(units, sm_count, free_sms, alone_s, released_after_s)
    if left_out is None:
        return alone_s
    unit_s = left_out[3]
    return alone_s + loss_units * unit_s * min(released_after_s / alone_s, 1.0)


def release_beside(units: float, sm_count: int, free_sms: float, alone_s: float, released_after_s: float) -> float:
    """How long a persistent kernel of `units` equal work units (a GEMM's output tiles x K splits) that
    takes `alone_s` alone runs when it starts with only `free_sms` of `sm_count` SMs free and gets the
    others `released_after_s` later (math.inf: never while it runs).

    Its grid is fixed at launch (one CTA per SM, or one per unit when there are fewer: cuBLAS's
    persistent Hopper kernels); each unit takes alone_s / ceil(units / grid). The CTAs that find a free
    SM take units from one queue (a tile scheduler); the CTAs left out start when the SMs are released
    and take units from the same queue; the kernel ends with its last unit. Held throughout this is
    rounds_beside's count of rounds (ceil(units / free SMs)); released early it costs what is left of
    the last round: a release part-way through a 2-round GEMM can cost it most of a round (measured in
    DDP's profiled backward steps: GEMMs beside a bucket's all-reduce 0.97-1.92x their time alone)."""
    if units <= 0 or alone_s <= 0:
        return max(alone_s, 0.0)
    left_out = _left_out_grid(units, sm_count, free_sms, alone_s, released_after_s)
    if left_out is None:
        return alone_s
    n_units, grid, free, unit_s = left_out
    late = grid - free
    ends = [0.0] * free  # when each running CTA takes its next unit (a heap)
    left, last = n_units, 0.0
    while left > 0:
        t = heapq.heappop(ends)
        if late and t >= released_after_s:  # the SMs are back: the left-out CTAs start
            for _ in range(late):
                heapq.heappush(ends, released_after_s)
            late = 0
            heapq.heappush(ends, t)
            continue
        left -= 1
        last = t + unit_s
        heapq.heappush(ends, last)
    return last

