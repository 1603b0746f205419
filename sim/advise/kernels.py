"""Per-kernel figures for advice: roofline and headroom, exposed share, and critical-path slack.

- **Roofline**: the kernel's FLOPs at the profile's peak rate (tensor cores per dtype for
  GEMM and attention, the FP32 pipes otherwise) against its minimum HBM bytes (each tensor
  it reads or writes once) at the profile's sustained bandwidth; the larger of the two.
  **Headroom** = predicted time / roofline time.
- **Attainable**: the same with the best efficiency the profile says any kernel of that
  family reaches (GEMM: `gemm.max_efficiency`; attention: its efficiency) plus the fixed
  launch-to-completion cost every kernel pays. A kernel within `near_ceiling_headroom` of
  its attainable time is near its ceiling.
- **Slack**: the speed-up a kernel needs for a target step gain g is, by Amdahl on its
  exposed share e of the step, 1 / (1 - g / e); unreachable when e <= g. Each answer is
  checked by simulating the step with the kernel that much faster.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from sim.costmodel import KernelCost
from sim.costmodel.host import host_costs
from sim.engine import simulate
from sim.graph import Graph, Op
from sim.hardware import Hardware

SLACK_TARGETS = (0.01, 0.05)
_REPEAT = re.compile(r"^([A-Za-z_][A-Za-z_]*?)\d+\.")


def family_name(op_name: str) -> str:
    """Group the copies of a repeated op (`layer0.fc1`, `layer1.fc1` → `layer*.fc1`) for display."""
    return _REPEAT.sub(lambda m: f"{m.group(1)}*.", op_name)


def _peak_flops(hw: Hardware, op: Op) -> tuple[float, float]:
    """(peak FLOP/s, best efficiency any kernel of this family reaches) for the op's compute."""
    fp32_peak = 2.0 * hw.fp32_lanes_per_sm * hw.sm_count * hw.clock_hz
    if op.kind in ("gemm", "attention"):
        dtype = str(op.attrs.get("dtype", "bf16"))
        peak = fp32_peak if dtype == "fp32" else hw.tensor_flops.get(dtype, fp32_peak)
        eff = hw.gemm_max_efficiency if op.kind == "gemm" else hw.attention_fwd_eff
        return peak, eff
    return fp32_peak, 1.0


def min_bytes(op: Op, graph: Graph) -> float:
    """Each tensor the op reads or writes, once: the traffic no implementation avoids."""
    return float(sum(graph.tensors[t].nbytes for t in dict.fromkeys(op.reads + op.writes)))


@dataclass(frozen=True)
class Roofline:
    roofline_s: float
    attainable_s: float
    flops: float
    bytes: float
    bound: str  # "compute" or "memory": which side of the roofline holds


def roofline(op: Op, graph: Graph, cost: KernelCost, hw: Hardware) -> Roofline | None:
    """The op's roofline and attainable times; None for collectives (bound by links, not by this GPU)."""
    if op.kind == "collective":
        return None
    peak, eff = _peak_flops(hw, op)
    nbytes = min_bytes(op, graph)
    compute_s = cost.flops / peak if peak > 0 else 0.0
    memory_s = nbytes / hw.hbm_sustained_bps
    attainable = max(compute_s / eff, memory_s) + hw.kernel_fixed_s
    return Roofline(max(compute_s, memory_s), attainable, cost.flops, nbytes,
                    "compute" if compute_s > memory_s else "memory")


def speedup_needed(exposed_share: float, target: float) -> float | None:
    """Amdahl: the speed-up of a kernel with this exposed share for `target` step gain; None if unreachable."""
    if exposed_share <= target:
        return None
    return 1.0 / (1.0 - target / exposed_share)


def faster(cost: KernelCost, speedup: float) -> KernelCost:
    """The same kernel `speedup` times faster (all of its time, as Amdahl assumes)."""
    return replace(cost, time_s=cost.time_s / speedup, compute_s=cost.compute_s / speedup,
                   memory_s=cost.memory_s / speedup, fixed_s=cost.fixed_s / speedup,
                   bw_demand=min(1.0, cost.bw_demand * speedup))


def simulated_gain(graphs: Sequence[tuple[float, Graph, tuple[KernelCost | None, ...], float]], hw: Hardware,
                   selected: Callable[[Op], bool], speedup: float) -> float:
    """Weighted step gain when the selected kernels run `speedup` times faster.

    `graphs`: (weight, graph, costs, baseline step seconds) per bucket.
    """
    base = new = 0.0
    for weight, graph, costs, base_s in graphs:
        changed = tuple(faster(c, speedup) if c is not None and selected(o) else c
                        for o, c in zip(graph.ops, costs, strict=True))
        new += weight * simulate(graph, changed, host_costs(hw)).end_s
        base += weight * base_s
    return 1.0 - new / base if base > 0 else 0.0
