"""Host-side costs of eager ops: framework dispatch by op kind; and of `host` ops: framework ops
that launch no kernel, autograd engine starts and backward nodes. Pure functions of (op, profile)."""

from __future__ import annotations

from sim.graph import Op
from sim.hardware import Hardware


def eager_dispatch_s(op: Op, hw: Hardware) -> float:
    """Framework time of one eager op before its driver launch (host.launch_us is separate).

    Autograd's per-node cost is not added here: a backward node may launch several kernels
    (MmBackward launches two GEMMs), so workloads declare nodes with `host` ops.
    The second and later kernels of one op that launches several (`launches: N`) pay none."""
    if op.attrs.get("follow_on"):
        return 0.0
    if op.library == "triton":  # a Triton kernel launched from Python (e.g. in an autograd.Function)
        return hw.triton_launch_s
    if op.kind == "collective":  # torch.distributed's call, measured per collective where the topology has it
        measured = hw.fabric.collective_host_s(str(op.attrs.get("collective", "")))
        if measured is not None:
            return measured
    return hw.eager_op_by_kind_s.get(op.kind, hw.eager_op_s)


def host_op_s(op: Op, hw: Hardware) -> float:
    """A `host` op: an explicit duration, `framework_ops` kernel-less framework ops,
    `backward_calls` starts of the autograd engine, `autograd_nodes` backward nodes and
    `function_calls` torch.autograd.Function calls and `module_calls` nn.Module calls."""
    seconds = float(op.attrs.get("duration_us", 0.0)) * 1e-6
    seconds += float(op.attrs.get("framework_ops", 0.0)) * hw.framework_op_s
    seconds += float(op.attrs.get("backward_calls", 0.0)) * hw.backward_call_s
    seconds += float(op.attrs.get("autograd_nodes", 0.0)) * hw.autograd_node_s
    seconds += float(op.attrs.get("function_calls", 0.0)) * hw.python_function_s
    seconds += float(op.attrs.get("module_calls", 0.0)) * hw.module_call_s
    return seconds


def compiled_call_s(op: Op, hw: Hardware) -> float:
    """The wrapper call of a compiled region: AOTAutograd's backward graph costs more than a forward."""
    return hw.compiled_backward_call_s if op.phase == "backward" else hw.compiled_call_s
