"""Host time of a replayed trace step, and one account of where each part of it came from.

A replayed step's host timeline is built one of three ways, each returning a `HostTimeline`
(the graph with every op's host time set, and per op the part carried over from the trace as
measured and the part the profile priced):
- `measured_host`: the trace's host time as recorded (replay --mode measured);
- `trace_host`: the trace's host time less what the profiler added to record its events
  (replay --mode predict, the default `--host trace`); a CUDA-graph launch, which the profiler
  slows by instrumenting every node, is priced by the profile;
- `model_host`: host time priced by the profile (`--host model`: for another CPU or framework),
  keeping only what the profile cannot know (long kernel-less ops, slow runtime calls, Python gaps
  of the user's own).
The replay JSON's `carried_host_us` / `priced_host_us` come from that account, never re-derived.

The profiler's cost per recorded event is not a constant: it is host CPU work, so it runs at the
host's speed when the trace was recorded, like everything else in the trace; and torch.compile's
per-kernel records (made in Python, with the kernel's arguments) cost several ordinary events.
`profiler_cost` scales the profile's in-context costs (`host.trace_profiler`, measured at a reference
speed) by the trace's own host speed: the median duration of reference ops in the trace (aten::empty,
cudaLaunchKernel) against their duration at the reference speed (`host.trace_profiler.clock_us`).

Pure functions of (graph, imported step, profile).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sim.costmodel import KernelCost
from sim.costmodel.host import (
    AUTOGRAD_NODE_PREFIX,
    GAP_CAP_US,
    eager_dispatch_s,
    framework_op_s,
    host_op_s,
    is_missing_framework_op,
    missing_class_s,
    missing_op_s,
)
from sim.graph import Graph
from sim.hardware import Hardware
from sim.ingest.build import GRAPH_CALLS, PRIOR_FAMILY, TRITON_CALLS, ImportedStep
from sim.ingest.kineto import StepEvents

MIN_CLOCK_SAMPLES = 5  # fewer traced calls of the reference ops: the trace's speed is not measured


@dataclass(frozen=True)
class HostTimeline:
    """Every op's host time (in `graph`) and, per op, seconds carried from the trace as measured
    and seconds the profile priced; `profiler_removed_s`: the profiler's cost taken off."""

    graph: Graph
    carried_s: tuple[float, ...]
    priced_s: tuple[float, ...]
    profiler_removed_s: float = 0.0
    per_event_s: float = 0.0
    host_speed: float = 1.0

    def totals_us(self) -> dict[str, float]:
        return {"carried_host_us": round(sum(self.carried_s) * 1e6, 3),
                "priced_host_us": round(sum(self.priced_s) * 1e6, 3)}


def profiler_config(step: ImportedStep) -> str:
    """How the trace was recorded: 'stack' (Python frames recorded), 'shapes' (record_shapes) or 'plain'."""
    if step.events.python_ts:
        return "stack"
    return "shapes" if step.events.meta.get("record_shapes") else "plain"


def trace_host_speed(step: ImportedStep, clock_us: Mapping[str, float]) -> float:
    """How slow the host ran when the trace was recorded, relative to the speed at which the profile's
    per-event profiler cost was measured: the geometric mean over the reference ops of the profile's
    `host.trace_profiler.clock_us` (`clock_us`: median traced duration of each at that speed) of their
    median duration in this step. 1.0 without a clock or when the step has too few calls of its ops."""
    if not clock_us:
        return 1.0
    durations: dict[str, list[float]] = {}
    for o in step.events.cpu_ops:
        if o.name in clock_us:
            durations.setdefault(o.name, []).append(o.end - o.ts)
    for r in step.events.runtime:
        if r.name in clock_us:
            durations.setdefault(r.name, []).append(r.end - r.ts)
    logs = [math.log(statistics.median(v) / clock_us[name]) for name, v in durations.items()
            if len(v) >= MIN_CLOCK_SAMPLES and statistics.median(v) > 0]
    return math.exp(sum(logs) / len(logs)) if logs else 1.0


ACCUMULATE_GRAD = AUTOGRAD_NODE_PREFIX + "torch::autograd::AccumulateGrad"
FOREACH_PREFIX = "aten::_foreach_"


def foreach_tensors(events: StepEvents) -> int | None:
    """Tensors per list of the step's foreach calls (an optimizer's): the gradients the step's backward
    accumulated into leaf tensors (its AccumulateGrad nodes: one per parameter with a gradient); for a
    step without a backward, the longest tensor list the trace recorded for a foreach op (record_shapes
    keeps a list's shapes only when it is short); None when neither is there."""
    nodes = sum(1 for o in events.cpu_ops if o.name == ACCUMULATE_GRAD)
    if nodes:
        return nodes
    lengths = [len(o.input_dims[0]) for o in events.cpu_ops
               if o.name.startswith(FOREACH_PREFIX) and o.input_dims and isinstance(o.input_dims[0], list)]
    return max(lengths) if lengths and max(lengths) > 0 else None


@dataclass(frozen=True)
class ProfilerCost:
    """What the profiler added to a traced step, per recorded event and per torch.compile kernel
    record on top of that (seconds), at the trace's host speed (relative to the reference)."""

    per_event_s: float = 0.0
    per_kernel_record_s: float = 0.0
    host_speed: float = 1.0

    def of(self, events: int, kernel_records: int) -> float:
        return max(0, events) * self.per_event_s + max(0, kernel_records) * self.per_kernel_record_s


def profiler_cost(step: ImportedStep, hw: Hardware) -> ProfilerCost:
    """The profiler's cost in this step: the profile's in-context cost (host.trace_profiler) scaled by
    the trace's host speed when the profile has it for the trace's configuration, else the tight-loop
    constant host.profiler_event_us."""
    cfg = profiler_config(step)
    ref = hw.trace_profiler_event_s.get(cfg)
    if ref is None:
        return ProfilerCost(hw.profiler_event_s.get(cfg, 0.0))
    speed = trace_host_speed(step, hw.trace_clock_us)
    return ProfilerCost(ref * speed, hw.trace_kernel_record_s.get(cfg, 0.0) * speed, speed)


def _traced_host_us(op: Any, imp: Any) -> float:
    return float(imp.doc.get("duration_us", 0.0)) if op.kind == "host" else float(imp.doc.get("host_us", 0.0))


def measured_host(graph: Graph, step: ImportedStep, hw: Hardware) -> HostTimeline:
    """The trace's host timeline as recorded: every op's host time is the trace's (the graph is kept)."""
    carried = []
    for op in graph.ops:
        if op.host_s is not None:
            carried.append(op.host_s)
        elif op.kind == "host":
            carried.append(host_op_s(op, hw))
        else:
            carried.append(0.0)
    return HostTimeline(graph, tuple(carried), tuple(0.0 for _ in carried))


def trace_host(graph: Graph, step: ImportedStep, hw: Hardware, keep_profiler: bool = False) -> HostTimeline:
    """Keep the trace's own host timeline: every kernel's host time since the previous launch and
    every host op (Python gaps, waits) take their measured duration, less what the profiler added
    to record the events in that interval (`profiler_cost`), so the step is predicted as
    it runs without the profiler; a CUDA-graph launch call, which the profiler slows by instrumenting
    each node, costs the profile's graph_launch_us instead of its traced time (that part is priced).
    With `keep_profiler` the profiler's cost stays (the step as it was recorded). An interval is
    never shortened below zero."""
    prof = ProfilerCost() if keep_profiler else profiler_cost(step, hw)
    removed = 0.0
    ops, carried, priced = [], [], []
    for op, imp in zip(graph.ops, step.ops, strict=True):
        if imp.family == PRIOR_FAMILY or op.kind == "sync":  # earlier steps' GPU work; a wait for the device
            ops.append(op)
            carried.append(0.0)
            priced.append(0.0)
            continue
        measured = _traced_host_us(op, imp)
        events = imp.trace_events
        graph_call_us = 0.0
        if imp.launch_api in GRAPH_CALLS and imp.call_us > 0 and not keep_profiler:
            # CUPTI instruments every node of a launched graph: the traced call is several times its
            # unprofiled cost (76-80 us against ~25 us for a 52-kernel decode graph on the H200). The
            # call is priced by the profile (host.graph_launch_us) and its own event is not taken off.
            removed += max(0.0, imp.call_us - hw.graph_launch_s * 1e6)
            measured = max(0.0, measured - imp.call_us)
            graph_call_us = hw.graph_launch_s * 1e6
            events -= 1
        cut = min(measured, prof.of(events, imp.kernel_records) * 1e6)
        removed += cut
        ops.append(op.with_(host_s=(measured - cut + graph_call_us) * 1e-6))
        carried.append((measured - cut) * 1e-6)
        priced.append(graph_call_us * 1e-6)
    return HostTimeline(graph.with_ops(ops), tuple(carried), tuple(priced), removed * 1e-6, prof.per_event_s,
                        prof.host_speed)


def model_host(graph: Graph, step: ImportedStep, hw: Hardware, keep_profiler: bool = True,
               host_speed: float = 1.0) -> HostTimeline:
    """Replace measured per-op host time by the profile's, by how the kernel was launched.

    Each kernel's host time since the previous launch is priced as the sum of
    - its own launch path: the in-context cost of its top-level framework op from the profile's
      `host.framework_ops` table, once per call (all its launches, autograd recording in a
      training step's forward, a backward node's engine cost included; a foreach op's by the
      length of its tensor lists, `foreach_tensors`); for an op the table does
      not know: its class's in-context price once per call where the profile applies it
      (host.missing_framework_op_classes, without autograd recording), else eager dispatch once per launching
      op (an ATen op's times host.missing_framework_ops.ratio where the profile applies it), Triton launcher, graph replay, an autograd
      node's cost when a backward node launched it; a torch.compile region's call (forward or
      backward) once per call; each kernel of a compiled forward region without autograd recording at
      the profile's in-context cost per such kernel where it applies it (host.compiled_in_context.kernel_us);
    - the kernel-less top-level ops the trace shows before it: framework ops and autograd
      nodes at the table's cost, or the profile's flat `framework_op_us` (an ATen op's times that ratio
      where applied) / `autograd_node_us`;
      one that runs longer than KERNELLESS_WORK_US (and any slow non-launch runtime call:
      cudaMalloc, cudaFree, initialisation) does work of its own and keeps its measured time
      (carried);
    - with `keep_profiler`, what the profiler added to record the events in that interval (the
      trace was recorded with it; the profile's host costs were measured without).
    Python between ops longer than GAP_MIN_US is a `host` op and keeps its measured time (carried),
    unless it is shorter than GAP_CAP_US and the ops after it are priced in context (from the table, or
    by the in-context ratio: their costs include the Python before them). Every priced cost is at the profile's reference
    host speed times `host_speed` (how slow the host runs against it; the carried times are the
    trace's own)."""
    prof = profiler_cost(step, hw) if keep_profiler else ProfilerCost()
    ops, carried, priced = [], [], []
    n = len(step.ops)
    table_top = False  # the current top-level op was priced whole from the table
    # an op the table lacks, priced in context (its tight-loop price x host.missing_framework_ops.ratio)
    scale = hw.missing_framework_op_scale
    missing_top = False  # the current top-level op is such an op

    def in_context(name: str) -> bool:
        """Whether op `name` is priced in context (its cost includes the Python just before it)."""
        return (framework_op_s(name, hw) is not None or framework_op_s(name, hw, True) is not None
                or missing_class_s(name, hw) is not None or (scale != 1.0 and is_missing_framework_op(name, hw)))
    call: float | None = None
    extern_kind = _extern_kinds(graph, step)
    tensors = foreach_tensors(step.events)  # a foreach call's list length (the table prices it per tensor)
    compiled_inputs = 0  # the tensors the last compiled forward called with autograd took (its backward's)
    # a kernel of a compiled forward region without autograd recording, in context (compiled_kernel_in_context_s)
    region_kernel = hw.compiled_kernel_in_context_s
    in_region = False  # the kernels since a compiled no-grad forward call are its region's (Triton or extern)
    for k, (op, imp) in enumerate(zip(graph.ops, step.ops, strict=True)):
        if op.kind == "host" and imp.doc["name"].endswith("_gap") and float(imp.doc["duration_us"]) < GAP_CAP_US:
            nxt = next((step.ops[j] for j in range(k + 1, n) if step.ops[j].family is not None), None)
            if nxt is not None and any(in_context(name) for name in (nxt.top_op, *nxt.kernelless_ops) if name):
                op = op.with_(host_s=0.0)  # the Python before a table-priced op is part of its in-context cost
        if op.is_kernel and imp.family not in (None, PRIOR_FAMILY):
            grad = step.training and op.phase == "forward"
            if imp.compiled_call:
                in_region = imp.compiled_call == "forward" and not imp.compiled_inputs
            elif not (imp.extern_op or imp.launch_api in TRITON_CALLS):
                in_region = False
            if imp.first_of_cpu_op:
                call = framework_op_s(imp.top_op, hw, grad, tensors) if imp.top_op else None
                if call is None and imp.top_op and not imp.top_is_autograd_node and not imp.compiled_call:
                    call = missing_class_s(imp.top_op, hw, grad)  # the table lacks it: its class's price, in context
                table_top = call is not None and imp.launch_api not in GRAPH_CALLS and not imp.compiled_call
                missing_top = (scale != 1.0 and not imp.top_is_autograd_node and not imp.compiled_call
                               and is_missing_framework_op(imp.top_op, hw))
            if region_kernel is not None and in_region:  # the compiled wrapper's line for it, in context
                host = region_kernel
            elif table_top:
                host = call if imp.first_of_cpu_op and call is not None else 0.0
            elif imp.launch_api in GRAPH_CALLS:
                host = hw.graph_launch_s if imp.doc["host_us"] > 0 or imp.first_of_cpu_op else 0.0
            elif imp.extern_op:  # a framework op a compiled graph's wrapper calls: one line of the wrapper
                # (compiled_kernel_us, as for a Triton kernel) and the op's own dispatch, once per call
                host = hw.compiled_kernel_s + (extern_dispatch_s(imp.extern_op, extern_kind[k], hw)
                                               if imp.first_of_extern else 0.0)
            elif imp.launch_api in TRITON_CALLS and not imp.top_is_autograd_node:
                host = hw.triton_launch_s
            else:  # one framework dispatch per launching op; a backward node's engine cost once per node
                host = (eager_dispatch_s(op, hw) if imp.first_of_launching_op else 0.0) + hw.launch_s
                if missing_top:  # every dispatch of a framework op the table lacks, in context
                    host *= scale
                if imp.top_is_autograd_node and imp.first_of_cpu_op:
                    host += hw.autograd_node_s
            for name in imp.kernelless_ops:
                node = name.startswith(AUTOGRAD_NODE_PREFIX)
                fixed = framework_op_s(name, hw, grad and not node, tensors)
                if fixed is None and not node:
                    fixed = missing_class_s(name, hw, grad)
                host += fixed if fixed is not None else (hw.autograd_node_s if node else missing_op_s(name, hw.framework_op_s, hw))
            call, grad_call, backward_call = hw.compiled_in_context_s or (
                hw.compiled_call_s, hw.compiled_grad_call_s, hw.compiled_backward_call_s)
            if imp.compiled_call == "forward":
                host += call
                if imp.compiled_inputs:  # called with autograd recording: AOTAutograd's CompiledFunction
                    host += grad_call + hw.compiled_grad_input_s * imp.compiled_inputs
                    compiled_inputs = imp.compiled_inputs
            elif imp.compiled_call == "backward":  # hands a gradient back per tensor its forward took
                host += backward_call + hw.compiled_backward_input_s * compiled_inputs
            host = host * host_speed + prof.of(imp.host_events, imp.kernel_records)
            kept = imp.kept_host_us * 1e-6
            op = op.with_(host_s=host + kept)
            carried.append(kept)
            priced.append(host)
        elif op.kind == "host":  # a Python gap or a wait: measured, unless folded into the next op's cost
            carried.append(op.host_s if op.host_s is not None else host_op_s(op, hw))
            priced.append(0.0)
        else:
            carried.append(op.host_s or 0.0)
            priced.append(0.0)
        ops.append(op)
    return HostTimeline(graph.with_ops(ops), tuple(carried), tuple(priced), 0.0, prof.per_event_s, host_speed)


EXTERN_KIND_ORDER = ("attention", "gemm", "reduction", "elementwise", "copy")


def _extern_kinds(graph: Graph, step: ImportedStep) -> dict[int, str]:
    """Per first kernel of a framework op a compiled graph calls: the kind of its main kernel (an
    attention call launches a memset first; its dispatch is the attention op's)."""
    out: dict[int, str] = {}
    first: int | None = None
    kinds: set[str] = set()
    for k, (op, imp) in enumerate(zip(graph.ops, step.ops, strict=True)):
        if not imp.extern_op or imp.first_of_extern:
            if first is not None:
                out[first] = next((x for x in EXTERN_KIND_ORDER if x in kinds), graph.ops[first].kind)
            first, kinds = (k, {op.kind}) if imp.first_of_extern else (None, set())
        elif first is not None:
            kinds.add(op.kind)
    if first is not None:
        out[first] = next((x for x in EXTERN_KIND_ORDER if x in kinds), graph.ops[first].kind)
    return out


def extern_dispatch_s(name: str, kind: str, hw: Hardware) -> float:
    """Host time of a framework op called from a compiled graph's wrapper (no autograd recording: the
    graph handles it): the table's in-context cost of the op by that name when the profile has it,
    else eager dispatch for its main kernel's kind; the driver launch is inside both."""
    call = framework_op_s(name, hw)
    return call if call is not None else hw.eager_op_by_kind_s.get(kind, hw.eager_op_s) + hw.launch_s


def kernel_account_us(costs: tuple[KernelCost | None, ...]) -> dict[str, float]:
    """Kernel time carried from the trace (measured durations and stream gaps of kernels kept at
    their measured time) next to what the cost model priced."""
    carried = sum(c.time_s for c in costs if c is not None and c.limiter == "measured")
    priced = sum(c.time_s for c in costs if c is not None and c.limiter != "measured")
    return {"carried_kernel_us": round(carried * 1e6, 3), "priced_kernel_us": round(priced * 1e6, 3)}

