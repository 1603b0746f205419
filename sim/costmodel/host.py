"""Host-side costs of eager ops: framework dispatch by op kind, autograd's per-node overhead in
the backward pass, framework ops that launch no kernel. Pure functions of (op, profile)."""

from __future__ import annotations

from sim.graph import Op
from sim.hardware import Hardware


def eager_dispatch_s(op: Op, hw: Hardware) -> float:
    """Framework time of one eager op before its driver launch (host.launch_us is separate)."""
    base = hw.eager_op_by_kind_s.get(op.kind, hw.eager_op_s)
    if op.phase == "backward":
        base += hw.autograd_node_s
    return base


def host_op_s(op: Op, hw: Hardware) -> float:
    """A `host` op: an explicit duration, plus `framework_ops` kernel-less framework ops."""
    seconds = float(op.attrs.get("duration_us", 0.0)) * 1e-6
    seconds += float(op.attrs.get("framework_ops", 0.0)) * hw.framework_op_s
    return seconds
