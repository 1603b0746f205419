"""Op kind host (a plugin, sim/ops/; a host kind): host time with no kernel — an explicit duration and counts
of the framework work a step does on the CPU (kernel-less framework ops, `.backward()` calls, autograd
nodes, `torch.autograd.Function` and `nn.Module` calls, DDP's own work).

The host model prices it (`sim.costmodel.host`: each count at the profile's in-context host cost) and
the engine runs it on the host thread; this file lists the kind: its workload keys and its example.
"""

from __future__ import annotations

from typing import Literal

from sim.ops import OpKind, define
from sim.schema.workload import Expr, OpBase


class HostOp(OpBase):
    """Host-only time: an explicit duration and/or a count of framework ops that launch no kernel."""

    kind: Literal["host"]
    duration_us: Expr = 0
    framework_ops: Expr = 0
    backward_calls: Expr = 0
    autograd_nodes: Expr = 0
    function_calls: Expr = 0
    module_calls: Expr = 0
    ddp_steps: Expr = 0
    ddp_hooks: Expr = 0


define(OpKind(
    spec=HostOp,
    cost=None,
    examples={"host": "{name: optimizer_py, kind: host, duration_us: 40, framework_ops: 12}"},
    host_kind=True,
))
