"""Host-side costs: what the engine's host thread pays, per execution mode, on one profile.

Eager ops pay framework dispatch (by framework op from the profile's table measured in real models,
or by op kind) and a driver launch; `host` ops pay framework ops that launch no kernel, autograd
engine starts and backward nodes; a compiled region pays one wrapper call and a Triton launcher per
kernel; a CUDA graph one replay call, its kernels the graph's per-kernel fixed cost. The per-op
prices are pure functions of (op, profile); `HostCosts` bundles them with the profile's fixed host
numbers so that the engine schedules without reading the profile.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sim.errors import InputError
from sim.graph import Op
from sim.hardware import Hardware

AUTOGRAD_NODE_PREFIX = "autograd::engine::evaluate_function: "
GAP_CAP_US = 100.0  # fit and replay alike: a longer host gap before an op is the user's own work, not the op's call


def op_key(name: str) -> str:
    """The host table's key for a CPU op name from a trace: the op itself (`aten::addmm`), a
    backward node without the engine's prefix (`MmBackward0`)."""
    return name[len(AUTOGRAD_NODE_PREFIX):] if name.startswith(AUTOGRAD_NODE_PREFIX) else name


def framework_op_s(name: str, hw: Hardware, requires_grad: bool = False, tensors: int | None = None) -> float | None:
    """In-context host time of one call of framework op `name` from the profile's table (with
    autograd recording when its inputs require grad and the table has that), or None if the
    table does not know the op (or knows it only with autograd recording and none is asked).

    A foreach op (`aten::_foreach_mul_`) loops over its tensor lists on the host: where the table
    has its per-tensor cost and `tensors` (the list length) is known, the call costs the table's
    time plus the per-tensor cost for each tensor more (or less) than it was measured with."""
    key = op_key(name)
    entry = hw.framework_op_table_s.get(key)
    if entry is None:
        return None
    plain, grad = entry
    cost = (grad if grad is not None else plain) if requires_grad else plain
    scaling = hw.framework_op_per_tensor_s.get(key) if tensors is not None and cost is not None else None
    if scaling is not None and tensors is not None and cost is not None:
        reference, per_tensor = scaling
        cost = max(0.0, cost + per_tensor * (tensors - reference))
    return cost


def is_missing_framework_op(name: str, hw: Hardware) -> bool:
    """Whether `name` is an ATen framework op the profile's in-context table lacks (with or without autograd
    recording): priced at its tight-loop cost times host.missing_framework_ops.ratio where that applies."""
    return name.startswith("aten::") and op_key(name) not in hw.framework_op_table_s


# The classes of framework ops the table lacks (host.missing_framework_op_classes), by name. NB: by name, not by
# call site (record_shapes traces carry no Python stack): VIEW_OPS are ATen's view and alias ops (metadata only, no
# kernel; PyTorch's "Tensor Views" list); MODULE_OPS those a torch.nn layer calls as its whole forward (its
# __call__ machinery before them); any other op is functional (elementwise math, cat, index_copy_; activations
# too: llama calls F.silu, and GPT's gelu is in the table).
VIEW_OPS = frozenset(f"aten::{n}" for n in (
    "view", "view_as", "_unsafe_view", "reshape", "_reshape_alias", "as_strided", "slice", "select", "narrow",
    "unsqueeze", "squeeze", "expand", "expand_as", "permute", "transpose", "t", "unbind", "split", "split_with_sizes",
    "chunk", "tensor_split", "unfold", "diagonal", "movedim", "flatten", "unflatten", "detach", "alias", "swapaxes",
    "view_as_real", "view_as_complex", "real", "imag"))
MODULE_OPS = frozenset(f"aten::{n}" for n in (
    "linear", "bilinear", "layer_norm", "rms_norm", "group_norm", "batch_norm", "instance_norm", "embedding",
    "embedding_bag", "dropout", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
    "conv_transpose3d", "lstm", "gru"))


def framework_op_class(name: str) -> str:
    """The class of framework op `name` for host.missing_framework_op_classes: `view`, `module` or `functional`."""
    key = op_key(name)
    return "view" if key in VIEW_OPS else "module" if key in MODULE_OPS else "functional"


def missing_class_s(name: str, hw: Hardware, requires_grad: bool = False) -> float | None:
    """In-context host time (launch included) of one call of framework op `name` the table lacks, by its class, where
    the profile applies that class's price (host.missing_framework_op_classes); None for an op the table has, an op
    called with autograd recording (the classes were fitted without), or a class not applied."""
    if requires_grad or not hw.missing_op_class_s or not is_missing_framework_op(name, hw):
        return None
    return hw.missing_op_class_s.get(framework_op_class(name))


def missing_op_s(name: str, tight_loop_s: float, hw: Hardware) -> float:
    """Host time of one call of framework op `name` whose tight-loop price is `tight_loop_s`: that price times
    the profile's in-context ratio when the table lacks the op and the profile applies the ratio."""
    return tight_loop_s * hw.missing_framework_op_scale if is_missing_framework_op(name, hw) else tight_loop_s


def speed_at_clock(clock_us: float, hw: Hardware) -> float | None:
    """The host speed (how slow against the profile's reference; the factor --host model's costs are scaled by)
    of a host whose clock (sim.calibrate.gpu.host_context.host_clock: geometric mean us per call of a fixed tight
    loop) reads `clock_us`: (clock_us / reference) ** exponent where the profile applies its level-aware relation
    (host.clock_level), else clock_us / host.clock_us; None when the profile has neither."""
    if hw.host_clock_level is not None:
        exponent, reference = hw.host_clock_level
        return float((clock_us / reference) ** exponent)
    if hw.host_clock_us is None:
        return None
    return float(clock_us / hw.host_clock_us)


def at_host_speed(hw: Hardware, speed: float) -> Hardware:
    """The profile as a step priced at host speed `speed` sees it: where host.framework_op_speed_level applies, the
    table's prices without autograd recording (and a foreach op's per-tensor share) times L0 * speed ** exponent in
    place of host.framework_op_level (the host speed itself still scales every priced cost, model_host); else `hw`.
    Only for a step priced at a given speed (own-speed rows, replay --host-clock / --host-speed): pricing at the
    reference speed keeps the table."""
    if hw.framework_op_speed_level is None or not speed > 0:
        return hw
    from dataclasses import replace

    l0, exponent = hw.framework_op_speed_level
    factor = l0 * speed ** exponent / hw.framework_op_level
    return replace(
        hw,
        framework_op_table_s={n: (None if p is None else p * factor, g) for n, (p, g) in hw.framework_op_table_s.items()},
        framework_op_per_tensor_s={n: (k, t * factor) for n, (k, t) in hw.framework_op_per_tensor_s.items()})


def _tensors(op: Op) -> int | None:
    """The tensors per list of an op's foreach framework op (`tensors:` in a workload), if it says."""
    n = op.attrs.get("tensors")
    return None if n is None else int(n)


def eager_dispatch_s(op: Op, hw: Hardware) -> float:
    """Framework time of one eager op before its driver launch (host.launch_us is separate).

    An op that names its `framework_op` found in the profile's table costs that call's measured
    in-context host time (launch included, so host.launch_us is taken off); one the table lacks costs its
    kind's tight-loop price, times host.missing_framework_ops.ratio where the profile applies it (its class's in-context
    price, host.missing_framework_op_classes, where that applies: it comes first). Autograd's
    per-node cost is not added here: a backward node may launch several kernels (MmBackward
    launches two GEMMs), so workloads declare nodes with `host` ops.
    The second and later kernels of one op that launches several (`launches: N`) pay none."""
    if op.attrs.get("follow_on"):
        return 0.0
    if op.library == "triton":  # a Triton kernel launched from Python (e.g. in an autograd.Function)
        return hw.triton_launch_s
    if op.kind == "collective":  # torch.distributed's call, measured per collective where the topology has it
        measured = hw.fabric.collective_host_s(str(op.attrs.get("collective", "")))
        if measured is not None:
            return measured
    name = op.attrs.get("framework_op")
    tight = hw.eager_op_by_kind_s.get(op.kind, hw.eager_op_s)
    if name:
        call = framework_op_s(str(name), hw, bool(op.attrs.get("requires_grad")), _tensors(op))
        if call is None:
            call = missing_class_s(str(name), hw, bool(op.attrs.get("requires_grad")))
        if call is not None:
            return max(0.0, call - hw.launch_s)
        if hw.missing_framework_op_scale != 1.0 and is_missing_framework_op(str(name), hw):
            # a framework op the table lacks: its tight-loop price (launch included) in context
            return max(0.0, missing_op_s(str(name), tight + hw.launch_s, hw) - hw.launch_s)
    return tight


#: The attributes eager_dispatch_s reads; with the op's kind and library, all it reads (eager_dispatch_key).
EAGER_DISPATCH_ATTRS = ("follow_on", "collective", "framework_op", "requires_grad", "tensors")


def eager_dispatch_key(op: Op) -> tuple[Any, ...]:
    """What eager_dispatch_s reads of the op, by value: its kind, library and the values (and their
    types) of EAGER_DISPATCH_ATTRS. Ops with equal keys have one price on one profile, whatever their
    objects' lifetimes (tests/costmodel/test_host.py fails if the price reads another field). The types
    keep 1, 1.0 and True apart: they compare equal, but str() (a framework op's name) tells them apart.
    An attribute value that cannot be hashed makes the key unhashable (OpPrices then
    prices that op each time)."""
    values = tuple(map(op.attrs.get, EAGER_DISPATCH_ATTRS))
    return (op.kind, op.library, values, tuple(map(type, values)))


class OpPrices:
    """A price function of ops (eager_dispatch_s or host_op_s on one profile) memoized by content: one
    price per `key(op)` (eager_dispatch_key, host_op_key: all the price reads). A repeat block's copies
    share their declaration's attrs object, so a lookup by that object comes first and spares computing
    the key per copy; each of its entries holds the object it was made for, so an entry never answers for
    another object that took a freed one's id. A HostCosts owns one per price (shared by the simulations
    it prices: a sweep worker's, through CostCache); past `max_entries` objects it starts afresh. Errors
    are raised each time, never kept."""

    def __init__(self, price: Callable[[Op], float], key: Callable[[Op], tuple[Any, ...]] | None = None,
                 max_entries: int = 1 << 16) -> None:
        self._price = price
        self._key = key if key is not None else eager_dispatch_key
        self.max_entries = max_entries
        self.by_content: dict[tuple[Any, ...], float] = {}
        # (id(attrs), kind, library) -> (that attrs object, its price): the engine reads it inline
        self.by_object: dict[tuple[int, str, str], tuple[Mapping[str, Any], float]] = {}

    def __call__(self, op: Op) -> float:
        attrs = op.attrs
        hit = self.by_object.get((id(attrs), op.kind, op.library))
        if hit is not None and hit[0] is attrs:
            return hit[1]
        return self.miss(op)

    def miss(self, op: Op) -> float:
        """The price by content (computed on the first op with this key), then kept by attrs object."""
        key = self._key(op)
        try:
            hash(key)
        except TypeError:  # an attribute value that cannot be hashed: priced each time
            return self._price(op)
        seconds = self.by_content.get(key)
        if seconds is None:
            seconds = self.by_content[key] = self._price(op)
        if len(self.by_object) >= self.max_entries:
            self.by_object.clear()
            self.by_content.clear()
        self.by_object[(id(op.attrs), op.kind, op.library)] = (op.attrs, seconds)
        return seconds


def host_op_s(op: Op, hw: Hardware) -> float:
    """A `host` op: an explicit duration, `framework_ops` kernel-less framework ops (each at the
    table's cost of its `framework_op` when the profile has it, else framework_op_us, times
    host.missing_framework_ops.ratio for a named op where the profile applies it),
    `backward_calls` starts of the autograd engine, `autograd_nodes` backward nodes and
    `function_calls` torch.autograd.Function calls, `module_calls` nn.Module calls, `ddp_steps` DDP
    steps' own host work and `ddp_hooks` DDP reducer hooks (a profile without DDP's measured costs
    cannot price those: an error, not a zero)."""
    seconds = float(op.attrs.get("duration_us", 0.0)) * 1e-6
    name = op.attrs.get("framework_op")
    call = framework_op_s(str(name), hw, bool(op.attrs.get("requires_grad")), _tensors(op)) if name else None
    if call is None and name:
        call = missing_class_s(str(name), hw, bool(op.attrs.get("requires_grad")))
    if call is None:
        call = missing_op_s(str(name), hw.framework_op_s, hw) if name else hw.framework_op_s
    seconds += float(op.attrs.get("framework_ops", 0.0)) * call
    seconds += float(op.attrs.get("backward_calls", 0.0)) * hw.backward_call_s
    seconds += float(op.attrs.get("autograd_nodes", 0.0)) * hw.autograd_node_s
    seconds += float(op.attrs.get("function_calls", 0.0)) * hw.python_function_s
    seconds += float(op.attrs.get("module_calls", 0.0)) * hw.module_call_s
    for attr, price in (("ddp_steps", hw.ddp_forward_s), ("ddp_hooks", hw.ddp_hook_s)):
        count = float(op.attrs.get(attr, 0.0))
        if count:
            if price is None:
                raise InputError(f"op {op.name!r} counts {attr}, which profile {hw.name!r} cannot price", path=attr,
                                 value=count, expected="a profile with host.ddp (DDP's host costs measured on >= 2 GPUs)")
            seconds += count * price
    return seconds


#: The attributes host_op_s reads: all it reads of an op (its name only to say what an error is about).
HOST_OP_ATTRS = ("duration_us", "framework_op", "requires_grad", "tensors", "framework_ops", "backward_calls",
                 "autograd_nodes", "function_calls", "module_calls", "ddp_steps", "ddp_hooks")


def host_op_key(op: Op) -> tuple[Any, ...]:
    """What host_op_s reads of the op, by value (as eager_dispatch_key): its kind, library and the values
    (and their types) of HOST_OP_ATTRS. Ops with equal keys have one price on one profile
    (tests/costmodel/test_host.py fails if the price reads another field)."""
    values = tuple(map(op.attrs.get, HOST_OP_ATTRS))
    return (op.kind, op.library, values, tuple(map(type, values)))


def compiled_call_s(op: Op, hw: Hardware) -> float:
    """The wrapper call of a compiled region (priced on its first op): AOTAutograd's backward graph costs
    more than a forward. Where the first op says the `tensors` the region takes (parameters and inputs;
    a backward region's: those its forward took), host.compiled_training adds its per-tensor costs and,
    for a forward whose first op `requires_grad`, the autograd call."""
    n = _tensors(op)
    if n is None:  # NB: the shipped workloads do not say; their compiled calls keep the tight-loop fit
        return hw.compiled_backward_call_s if op.phase == "backward" else hw.compiled_call_s
    if op.phase == "backward":
        return hw.compiled_backward_call_s + hw.compiled_backward_input_s * n
    if op.attrs.get("requires_grad"):
        return hw.compiled_call_s + hw.compiled_grad_call_s + hw.compiled_grad_input_s * n
    return hw.compiled_call_s


@dataclass(frozen=True)
class HostCosts:
    """The host prices one simulation uses (built from a profile by `host_costs`): the fixed costs
    the engine's host thread and streams pay, and the per-op prices as methods."""

    profile_name: str  # the profile's name, carried into the Trace
    launch_queue_depth: int  # kernels a stream's launch queue holds before the host blocks
    launch_s: float  # driver launch of one eager kernel
    launch_latency_s: float  # launch to earliest start on the device
    sync_s: float  # a synchronize's own host cost once the streams are idle
    compiled_kernel_s: float  # the Triton launcher of one kernel of a compiled region
    graph_launch_s: float  # one CUDA graph replay call
    graph_kernel_s: float  # a graph member's per-kernel fixed cost (replaces its stream launch's)
    hardware: Hardware = field(repr=False, compare=False)  # the per-op prices' profile
    # eager_dispatch_s on this profile, memoized by content for every simulation these prices serve
    dispatch_prices: OpPrices = field(init=False, repr=False, compare=False)
    # host_op_s on this profile, memoized by content (host_op_key) in the same way
    host_op_prices: OpPrices = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # The memo's price function holds the profile, not this object (no reference cycle).
        object.__setattr__(self, "dispatch_prices", OpPrices(functools.partial(eager_dispatch_s, hw=self.hardware)))
        object.__setattr__(self, "host_op_prices", OpPrices(functools.partial(host_op_s, hw=self.hardware), host_op_key))

    def eager_dispatch_s(self, op: Op) -> float:
        return eager_dispatch_s(op, self.hardware)

    def host_op_s(self, op: Op) -> float:
        return self.host_op_prices(op)

    def compiled_call_s(self, op: Op) -> float:
        return compiled_call_s(op, self.hardware)


def host_costs(hw: Hardware) -> HostCosts:
    """The host prices of profile `hw`."""
    return HostCosts(profile_name=hw.name, launch_queue_depth=hw.launch_queue_depth, launch_s=hw.launch_s,
                     launch_latency_s=hw.launch_latency_s, sync_s=hw.sync_s, compiled_kernel_s=hw.compiled_kernel_s,
                     graph_launch_s=hw.graph_launch_s, graph_kernel_s=hw.graph_kernel_s, hardware=hw)
