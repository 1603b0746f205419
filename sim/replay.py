"""Replay one step of a profiler trace through the engine, with measured or predicted costs.

- `measured`: every kernel takes its trace duration (plus the stream's measured idle gap
  before it when it was already queued), every op's host time is the trace's, and the
  profile's launch latency and sync return time are replaced by the values measured in
  the trace. The simulated step time checks the dependency reconstruction and the engine.
- `predict`: kernels are priced by the cost model on the given profile (kernels whose
  shapes are unknown keep their measured time and are reported as `unpriced`). The host
  timeline is, by default (`host="trace"`), the trace's own less the profiler's measured
  per-event cost: the trace already knows what the framework and the user's Python cost on
  that CPU, so only device time is predicted. `host="model"` prices per-op host costs from
  the profile instead (eager dispatch + launch, Triton launcher, graph replay; for another
  CPU or framework version); host gaps outside any CPU op keep their measured time.

The result is plain data in the `kernelsim.replay/v1` shape (docs/traces.md).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from sim.costmodel import KernelCost
from sim.costmodel.host import (
    AUTOGRAD_NODE_PREFIX,
    GAP_CAP_US,
    eager_dispatch_s,
    framework_op_s,
    host_costs,
)
from sim.costmodel.pricing import price
from sim.engine import simulate
from sim.graph import Graph
from sim.hardware import Hardware
from sim.ingest import ImportedStep, import_trace, workload_doc
from sim.ingest.build import GRAPH_CALLS, PRIOR_FAMILY, TRITON_CALLS
from sim.schema.workload import WorkloadFile
from sim.trace import HOST_TRACK, Trace
from sim.workload import Workload, check_workload

REPLAY_SCHEMA = "kernelsim.replay/v1"
MODES = ("measured", "predict")
HOST_SOURCES = ("trace", "model")


def step_graph(step: ImportedStep, source: Path) -> Graph:
    """The imported step's graph, built through the same schema and loader as a workload file."""
    doc = workload_doc(step, source)
    try:
        spec = WorkloadFile.model_validate(doc)
    except ValidationError as exc:  # the importer wrote something its own schema rejects: a bug
        raise RuntimeError(f"imported workload does not validate: {exc}") from exc
    wl = Workload(spec=spec, file=str(source))
    check_workload(wl)
    return wl.build(wl.params_for(wl.buckets()[0]))


def profiler_config(step: ImportedStep) -> str:
    """How the trace was recorded: 'stack' (Python frames recorded), 'shapes' (record_shapes) or 'plain'."""
    if step.events.python_ts:
        return "stack"
    return "shapes" if step.events.meta.get("record_shapes") else "plain"


def predicted_host(graph: Graph, step: ImportedStep, hw: Hardware, keep_profiler: bool = True) -> Graph:
    """Replace measured per-op host time by the profile's, by how the kernel was launched.

    Each kernel's host time since the previous launch is priced as the sum of
    - its own launch path: the in-context cost of its top-level framework op from the profile's
      `host.framework_ops` table, once per call (all its launches, autograd recording in a
      training step's forward, a backward node's engine cost included); for an op the table does
      not know: eager dispatch once per launching op, Triton launcher, graph replay, an autograd
      node's cost when a backward node launched it; a torch.compile region's call (forward or
      backward) once per call;
    - the kernel-less top-level ops the trace shows before it: framework ops and autograd
      nodes at the table's cost, or the profile's flat `framework_op_us` / `autograd_node_us`;
      one that runs longer than KERNELLESS_WORK_US (and any slow non-launch runtime call:
      cudaMalloc, cudaFree, initialisation) does work of its own and keeps its measured time;
    - with `keep_profiler`, what the profiler added to record the events in that interval (the
      trace was recorded with it; the profile's host costs were measured without).
    Python between ops longer than GAP_MIN_US is a `host` op and keeps its measured time, unless it is
    shorter than GAP_CAP_US and the ops after it are priced from the table (their in-context costs
    include the Python before them)."""
    per_event = hw.profiler_event_s.get(profiler_config(step), 0.0) if keep_profiler else 0.0
    ops = []
    n = len(step.ops)
    table_top = False  # the current top-level op was priced whole from the table
    call: float | None = None
    for k, (op, imp) in enumerate(zip(graph.ops, step.ops, strict=True)):
        if op.kind == "host" and imp.doc["name"].endswith("_gap") and float(imp.doc["duration_us"]) < GAP_CAP_US:
            nxt = next((step.ops[j] for j in range(k + 1, n) if step.ops[j].family is not None), None)
            if nxt is not None and any(framework_op_s(name, hw) is not None or framework_op_s(name, hw, True) is not None
                                       for name in (nxt.top_op, *nxt.kernelless_ops) if name):
                op = op.with_(host_s=0.0)  # the Python before a table-priced op is part of its in-context cost
        if op.is_kernel and imp.family not in (None, PRIOR_FAMILY):
            grad = step.training and op.phase == "forward"
            if imp.first_of_cpu_op:
                call = framework_op_s(imp.top_op, hw, grad) if imp.top_op else None
                table_top = call is not None and imp.launch_api not in GRAPH_CALLS and not imp.compiled_call
            if table_top:
                host = call if imp.first_of_cpu_op and call is not None else 0.0
            elif imp.launch_api in GRAPH_CALLS:
                host = hw.graph_launch_s if imp.doc["host_us"] > 0 or imp.first_of_cpu_op else 0.0
            elif imp.launch_api in TRITON_CALLS and not imp.top_is_autograd_node:
                host = hw.triton_launch_s
            else:  # one framework dispatch per launching op; a backward node's engine cost once per node
                host = (eager_dispatch_s(op, hw) if imp.first_of_launching_op else 0.0) + hw.launch_s
                if imp.top_is_autograd_node and imp.first_of_cpu_op:
                    host += hw.autograd_node_s
            for name in imp.kernelless_ops:
                node = name.startswith(AUTOGRAD_NODE_PREFIX)
                fixed = framework_op_s(name, hw, grad and not node)
                host += fixed if fixed is not None else (hw.autograd_node_s if node else hw.framework_op_s)
            host += imp.kept_host_us * 1e-6
            if imp.compiled_call == "forward":
                host += hw.compiled_call_s
            elif imp.compiled_call == "backward":
                host += hw.compiled_backward_call_s
            host += imp.host_events * per_event
            op = op.with_(host_s=host)
        ops.append(op)
    return graph.with_ops(ops)


def trace_host(graph: Graph, step: ImportedStep, hw: Hardware, keep_profiler: bool = False) -> tuple[Graph, float, float]:
    """Keep the trace's own host timeline: every kernel's host time since the previous launch and
    every host op (Python gaps, waits) take their measured duration, less what the profiler added
    to record the events in that interval (`profiler_event_us` per event, for the configuration the
    trace was recorded with), so the step is predicted as it runs without the profiler; a CUDA-graph
    launch call, which the profiler slows by instrumenting each node, costs the profile's
    graph_launch_us instead of its traced time. With `keep_profiler` the profiler's cost stays
    (the step as it was recorded).

    Returns the graph, the host time kept and the host time removed as the profiler's, in
    microseconds. An interval is never shortened below zero."""
    per_event_us = 0.0 if keep_profiler else hw.profiler_event_s.get(profiler_config(step), 0.0) * 1e6
    kept = removed = 0.0
    ops = []
    for op, imp in zip(graph.ops, step.ops, strict=True):
        if imp.family == PRIOR_FAMILY or op.kind == "sync":  # earlier steps' GPU work; a wait for the device
            ops.append(op)
            continue
        measured = float(imp.doc.get("duration_us", 0.0)) if op.kind == "host" else float(imp.doc.get("host_us", 0.0))
        events = imp.trace_events
        if imp.launch_api in GRAPH_CALLS and imp.call_us > 0 and not keep_profiler:
            # CUPTI instruments every node of a launched graph: the traced call is several times its
            # unprofiled cost (76-80 us against ~25 us for a 52-kernel decode graph on the H200). The
            # call is priced by the profile (host.graph_launch_us) and its own event is not taken off.
            removed += max(0.0, imp.call_us - hw.graph_launch_s * 1e6)
            measured += hw.graph_launch_s * 1e6 - imp.call_us
            measured = max(measured, 0.0)
            events -= 1
        cut = min(measured, max(0, events) * per_event_us)
        removed += cut
        kept += measured - cut
        ops.append(op.with_(host_s=(measured - cut) * 1e-6))
    return graph.with_ops(ops), kept, removed


def graph_member_costs(costs: tuple[KernelCost | None, ...], graph: Graph, step: ImportedStep,
                       hw: Hardware) -> tuple[KernelCost | None, ...]:
    """Kernels a CUDA-graph launch replayed pay the graph's per-kernel fixed cost (host.graph_kernel_us),
    not a stream launch's: the same rule as the engine's cuda_graph mode. Kernels kept at their
    measured time (unpriced: a graph's kernels have no CPU op, so no shapes) keep their duration but
    not the stream gap before them, which the profiler stretches inside a graph (CUPTI instruments
    every node: 4.6-5.7 us per kernel in the H200 decode graphs against 0.7 us unprofiled); they pay
    the graph's per-kernel cost instead."""
    out = list(costs)
    for i, (_op, imp) in enumerate(zip(graph.ops, step.ops, strict=True)):
        c = out[i]
        if c is None or imp.launch_api not in GRAPH_CALLS:
            continue
        out[i] = replace(c, time_s=max(0.0, c.time_s - c.fixed_s) + hw.graph_kernel_s, fixed_s=hw.graph_kernel_s)
    return tuple(out)


def replay(path: Path, hw: Hardware, mode: str = "measured", step: str | None = None, host: str = "trace",
           keep_profiler: bool = False, unprofiled_us: float | None = None,
           idle_start: bool = False, imported: ImportedStep | None = None) -> tuple[dict[str, Any], Trace]:
    """Simulate one step of the trace at `path`; returns the JSON-ready result and the simulated Trace.

    In predict mode `host` says where host time comes from: "trace" keeps the trace's own host
    timeline (less the profiler's cost unless `keep_profiler`), "model" prices it from the profile.
    `unprofiled_us`, the step's time measured without the profiler, adds `unprofiled_error`.
    `idle_start` drops earlier steps' GPU work still running when the step began: the step as it
    runs from an idle GPU (as a loop that synchronizes after every step measures it). `imported`:
    the step already imported from `path` (to replay one trace several ways without reading it again)."""
    if mode not in MODES:
        raise ValueError(f"unknown replay mode {mode!r} (expected one of {MODES})")
    if host not in HOST_SOURCES:
        raise ValueError(f"unknown host source {host!r} (expected one of {HOST_SOURCES})")
    if imported is None:
        imported = import_trace(path, step)
    if idle_start:
        imported = replace(imported, ops=[o for o in imported.ops if o.family != PRIOR_FAMILY])
    graph = step_graph(imported, path)
    profiler_us = 0.0
    if mode == "measured":
        run_hw = replace(
            hw,
            launch_latency_s=max(0.0, imported.launch_latency_us) * 1e-6
            if imported.launch_latency_us is not None else hw.launch_latency_s,
            sync_s=max(0.0, imported.sync_return_us) * 1e-6 if imported.sync_return_us is not None else hw.sync_s,
        )
        costs = price(graph, run_hw, measured=True)
    else:
        run_hw = hw
        recorded = graph  # the trace's own host times, as `kernelsim run` on the imported workload keeps them
        if host == "trace":
            graph, _, profiler_us = trace_host(graph, imported, hw, keep_profiler)
        else:
            graph = predicted_host(graph, imported, hw, keep_profiler)
        costs = graph_member_costs(price(graph, hw), graph, imported, hw)
    trace = simulate(graph, costs, host_costs(run_hw))
    result = summarize(imported, trace, path, hw, mode)
    if mode == "predict":
        result["host"] = host_comparison(recorded, graph, costs, hw)
        # What the prediction took from the trace as measured rather than from the model.
        result["host_source"] = host
        # carried_* / priced_* (what came from the trace, what the model priced) are summarize()'s
        result["profiler_removed_us"] = round(profiler_us, 3)
        if unprofiled_us is not None:
            result["unprofiled_time_us"] = round(unprofiled_us, 3)
            result["unprofiled_error"] = (result["predicted_time_us"] - unprofiled_us) / unprofiled_us
        if host == "trace" and profiler_us > 0:
            result["notes"].append(
                f"the trace's host timeline is kept less the profiler's cost ({profiler_us:.1f} us of host time, "
                f"{hw.profiler_event_s.get(profiler_config(imported), 0.0) * 1e6:.2f} us per event): the "
                "prediction is the step without the profiler, measured_time_us is the step as recorded with it")
    return result, trace


def host_comparison(recorded: Graph, predicted: Graph, costs: tuple[Any, ...], hw: Hardware) -> dict[str, float]:
    """Predict mode's host time against the trace's, and the step with the trace's host times kept.

    `kernelsim run` on the imported workload keeps every op's measured `host_us` (a what-if
    re-prices only what its transforms change); predict mode's host is the trace's less the
    profiler's cost (`--host trace`) or the profile's (`--host model`). With the same kernel costs,
    the step with the trace's host times as recorded is what `run` gives.
    """
    kept = simulate(recorded, costs, host_costs(hw))
    return {
        "trace_host_us": round(sum(o.host_s or 0.0 for o in recorded.ops) * 1e6, 3),
        "predicted_host_us": round(sum(o.host_s or 0.0 for o in predicted.ops) * 1e6, 3),
        "step_with_trace_host_us": round(kept.end_s * 1e6, 3),
    }


def summarize(step: ImportedStep, trace: Trace, path: Path, hw: Hardware, mode: str) -> dict[str, Any]:
    simulated: dict[int, float] = {}
    for iv in trace.intervals:
        if iv.track != HOST_TRACK and iv.op >= 0:
            simulated[iv.op] = simulated.get(iv.op, 0.0) + iv.duration_s * 1e6
    families: dict[str, dict[str, Any]] = {}
    unpriced_kernels, unpriced_us = 0, 0.0
    unpriced_families: dict[str, int] = {}
    prior_us = 0.0
    for i, (op, imp) in enumerate(zip(trace.graph.ops, step.ops, strict=True)):
        if imp.family is None:
            continue
        if imp.family == PRIOR_FAMILY:
            prior_us += imp.measured_us
            continue
        cost = trace.costs[i]
        gap = cost.fixed_s * 1e6 if cost is not None and cost.limiter == "measured" else 0.0
        f = families.setdefault(imp.family, {"kernels": 0, "measured_us": 0.0, "predicted_us": 0.0, "unpriced": 0})
        f["kernels"] += 1
        f["measured_us"] += imp.measured_us
        f["predicted_us"] += simulated.get(i, 0.0) - gap
        if op.attrs.get("unpriced"):
            f["unpriced"] += 1
            unpriced_kernels += 1
            unpriced_us += imp.measured_us
            unpriced_families[imp.family] = unpriced_families.get(imp.family, 0) + 1
    for f in families.values():
        f["measured_us"] = round(f["measured_us"], 3)
        f["predicted_us"] = round(f["predicted_us"], 3)
        f["error"] = (f["predicted_us"] - f["measured_us"]) / f["measured_us"] if f["measured_us"] > 0 else None
    measured = step.measured_time_us
    predicted = trace.end_s * 1e6
    ev = step.events
    carried = carried_time(trace, step, mode)
    return {
        "schema": REPLAY_SCHEMA,
        "trace": str(path),
        "mode": mode,
        "hardware": hw.name,
        "step": ev.step.name,
        "steps_in_trace": [s.name for s in ev.steps],
        "measured_time_us": round(measured, 3),
        "predicted_time_us": round(predicted, 3),
        "error": (predicted - measured) / measured,
        **carried,
        "kernels": sum(f["kernels"] for f in families.values()),
        "families": dict(sorted(families.items())),
        "unpriced": {"kernels": unpriced_kernels, "measured_us": round(unpriced_us, 3),
                     "families": unpriced_families},
        "host_gaps": sum(1 for o in step.ops if o.doc["kind"] == "host"),
        "syncs": sum(1 for o in step.ops if o.doc["kind"] == "sync"),
        "prior_work_us": round(prior_us, 3),
        "device_gaps_us": round(sum(float(o.doc.get("device_gap_us", 0.0)) for o in step.ops), 3),
        "launch_latency_us": round(trace_latency(step, hw, mode), 3),
        "notes": step.notes + [f"{n} events of unknown category {c!r} ignored"
                               for c, n in sorted(ev.unknown_categories.items())],
    }


def carried_time(trace: Trace, step: ImportedStep, mode: str) -> dict[str, float]:
    """How much of the prediction is the trace's own measurement carried over, next to what the
    model priced: kernel time (measured durations and stream gaps of kernels priced from the
    trace) and host time (ops that keep their measured host time: Python gaps, slow kernel-less
    ops and runtime calls; in measured mode, all of it)."""
    carried_k = priced_k = carried_h = priced_h = 0.0
    simulated_host: dict[int, float] = {}
    for iv in trace.intervals:
        if iv.track == HOST_TRACK and iv.op >= 0:
            simulated_host[iv.op] = simulated_host.get(iv.op, 0.0) + iv.duration_s
    for i, (op, cost, imp) in enumerate(zip(trace.graph.ops, trace.costs, step.ops, strict=True)):
        if cost is not None:
            if cost.limiter == "measured":
                carried_k += cost.time_s
            else:
                priced_k += cost.time_s
        if op.host_s is None:  # the profile's host cost for this op
            priced_h += simulated_host.get(i, 0.0)
        elif mode == "measured" or not op.is_kernel or imp.family in (None, PRIOR_FAMILY):
            carried_h += op.host_s
        else:
            kept = imp.kept_host_us * 1e-6
            carried_h += kept
            priced_h += max(0.0, op.host_s - kept)
    return {"carried_host_us": round(carried_h * 1e6, 3), "carried_kernel_us": round(carried_k * 1e6, 3),
            "priced_host_us": round(priced_h * 1e6, 3), "priced_kernel_us": round(priced_k * 1e6, 3)}


def trace_latency(step: ImportedStep, hw: Hardware, mode: str) -> float:
    if mode == "measured" and step.launch_latency_us is not None:
        return max(0.0, step.launch_latency_us)
    return hw.launch_latency_s * 1e6
