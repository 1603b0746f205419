"""Replay one step of a profiler trace through the engine, with measured or predicted costs.

- `measured`: every kernel takes its trace duration (plus the stream's measured idle gap
  before it when it was already queued), every op's host time is the trace's, and the
  profile's launch latency and sync return time are replaced by the values measured in
  the trace. The simulated step time checks the dependency reconstruction and the engine.
- `predict`: kernels are priced by the cost model on the given profile (kernels whose
  shapes are unknown keep their measured time and are reported as `unpriced`); per-op
  host costs come from the profile (eager dispatch + launch, Triton launcher, graph
  replay); host gaps outside any CPU op (the user's Python) keep their measured time.

The result is plain data in the `kernelsim.replay/v1` shape (docs/traces.md).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from sim.costmodel.host import eager_dispatch_s
from sim.engine import simulate
from sim.graph import Graph
from sim.hardware import Hardware
from sim.ingest import ImportedStep, import_trace, workload_doc
from sim.ingest.build import GRAPH_CALLS, PRIOR_FAMILY, TRITON_CALLS
from sim.scenario import price
from sim.schema.workload import WorkloadFile
from sim.trace import HOST_TRACK, Trace
from sim.workload import Workload, check_workload

REPLAY_SCHEMA = "kernelsim.replay/v1"
MODES = ("measured", "predict")


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


def predicted_host(graph: Graph, step: ImportedStep, hw: Hardware) -> Graph:
    """Replace measured per-op host time by the profile's, by how the kernel was launched.

    Each kernel's host time since the previous launch is priced as the sum of
    - its own launch path: eager dispatch once per launching op, Triton launcher, graph replay;
      an autograd node's cost when a backward node launched it; a torch.compile region's call
      (forward or backward) once per call;
    - the kernel-less top-level ops the trace shows before it: framework ops and autograd
      nodes at the profile's cost; one that runs longer than KERNELLESS_WORK_US (and any slow
      non-launch runtime call: cudaMalloc, cudaFree, initialisation) does work of its own and
      keeps its measured time;
    - what the profiler added to record the events in that interval (the trace was recorded
      with it; the profile's host costs were measured without).
    Python between ops longer than GAP_MIN_US is a `host` op and keeps its measured time."""
    per_event = hw.profiler_event_s.get(profiler_config(step), 0.0)
    ops = []
    for op, imp in zip(graph.ops, step.ops, strict=True):
        if op.is_kernel and imp.family not in (None, PRIOR_FAMILY):
            if imp.launch_api in GRAPH_CALLS:
                host = hw.graph_launch_s if imp.doc["host_us"] > 0 or imp.first_of_cpu_op else 0.0
            elif imp.launch_api in TRITON_CALLS and not imp.top_is_autograd_node:
                host = hw.triton_launch_s
            else:  # one framework dispatch per launching op; a backward node's engine cost once per node
                host = (eager_dispatch_s(op, hw) if imp.first_of_launching_op else 0.0) + hw.launch_s
                if imp.top_is_autograd_node and imp.first_of_cpu_op:
                    host += hw.autograd_node_s
            host += imp.framework_ops * hw.framework_op_s + imp.autograd_nodes * hw.autograd_node_s
            host += imp.kept_host_us * 1e-6
            if imp.compiled_call == "forward":
                host += hw.compiled_call_s
            elif imp.compiled_call == "backward":
                host += hw.compiled_backward_call_s
            host += imp.host_events * per_event
            op = op.with_(host_s=host)
        ops.append(op)
    return graph.with_ops(ops)


def replay(path: Path, hw: Hardware, mode: str = "measured", step: str | None = None) -> tuple[dict[str, Any], Trace]:
    """Simulate one step of the trace at `path`; returns the JSON-ready result and the simulated Trace."""
    if mode not in MODES:
        raise ValueError(f"unknown replay mode {mode!r} (expected one of {MODES})")
    imported = import_trace(path, step)
    graph = step_graph(imported, path)
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
        trace_host = graph
        graph = predicted_host(graph, imported, hw)
        costs = price(graph, hw)
    trace = simulate(graph, costs, run_hw)
    result = summarize(imported, trace, path, hw, mode)
    if mode == "predict":
        result["host"] = host_comparison(trace_host, graph, costs, hw)
    return result, trace


def host_comparison(trace_host: Graph, predicted: Graph, costs: tuple[Any, ...], hw: Hardware) -> dict[str, float]:
    """Predict mode's host time against the trace's, and the step with the trace's host times kept.

    `kernelsim run` on the imported workload keeps every op's measured `host_us` (a what-if
    re-prices only what its transforms change); predict mode prices the host side from the
    profile. With the same kernel costs, the step with the trace's host times is what `run` gives.
    """
    kept = simulate(trace_host, costs, hw)
    return {
        "trace_host_us": round(sum(o.host_s or 0.0 for o in trace_host.ops) * 1e6, 3),
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


def render_replay(result: dict[str, Any], console: Any) -> None:
    """The replay result as a table: step time, then per family measured vs predicted."""
    from rich.table import Table

    t = Table(title=f"{result['trace']} · {result['step']} · {result['mode']} on {result['hardware']}")
    for col in ("family", "kernels", "measured us", "predicted us", "error", "unpriced"):
        t.add_column(col, justify="left" if col == "family" else "right")
    for name, f in result["families"].items():
        err = f"{f['error'] * 100:+.1f}%" if f["error"] is not None else "-"
        t.add_row(name, str(f["kernels"]), f"{f['measured_us']:.1f}", f"{f['predicted_us']:.1f}", err,
                  str(f["unpriced"]))
    t.add_row("step", str(result["kernels"]), f"{result['measured_time_us']:.1f}",
              f"{result['predicted_time_us']:.1f}", f"{result['error'] * 100:+.2f}%", str(result["unpriced"]["kernels"]),
              style="bold")
    console.print(t)
    u = result["unpriced"]
    console.print(f"unpriced (shapes unknown, kept at measured time): {u['kernels']} kernels, "
                  f"{u['measured_us']:.1f} us" + (f" ({', '.join(f'{k} {v}' for k, v in u['families'].items())})"
                                                   if u["families"] else ""))
    if "host" in result:
        h = result["host"]
        console.print(f"host time between launches priced from the profile: {h['predicted_host_us']:.1f} us "
                      f"(the trace's: {h['trace_host_us']:.1f} us); with the trace's host times, as `kernelsim run` "
                      f"on the imported workload keeps them, the step is {h['step_with_trace_host_us']:.1f} us")
    for note in result["notes"]:
        console.print(f"note: {note}")
