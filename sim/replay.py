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
from sim.costmodel.host import at_host_speed, host_costs
from sim.costmodel.pricing import price
from sim.costmodel.trace_host import (
    HostTimeline,
    kernel_account_us,
    measured_host,
    model_host,
    trace_host,
    trace_host_speed,
)
from sim.engine import simulate
from sim.graph import Graph
from sim.hardware import Hardware
from sim.ingest import ImportedStep, import_trace, workload_doc
from sim.ingest.build import GRAPH_CALLS, PRIOR_FAMILY
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
           idle_start: bool = False, imported: ImportedStep | None = None,
           host_speed: float | str | None = None) -> tuple[dict[str, Any], Trace]:
    """Simulate one step of the trace at `path`; returns the JSON-ready result and the simulated Trace.

    In predict mode `host` says where host time comes from: "trace" keeps the trace's own host
    timeline (less the profiler's cost unless `keep_profiler`), "model" prices it from the profile.
    `unprofiled_us`, the step's time measured without the profiler, adds `unprofiled_error`.
    `idle_start` drops earlier steps' GPU work still running when the step began: the step as it
    runs from an idle GPU (as a loop that synchronizes after every step measures it). `imported`:
    the step already imported from `path` (to replay one trace several ways without reading it again).
    `host_speed` (`host="model"` only): how slow the host runs against the profile's reference host
    speed (1.0, the speed its host table was fitted at: host.trace_profiler.clock_us); "trace": the
    trace's own, from its clock ops (sim.costmodel.trace_host.trace_host_speed); None: the reference speed with the
    table as fitted (a given speed, 1.0 included, prices the table at that speed: sim.costmodel.host.at_host_speed)."""
    if mode not in MODES:
        raise ValueError(f"unknown replay mode {mode!r} (expected one of {MODES})")
    if host not in HOST_SOURCES:
        raise ValueError(f"unknown host source {host!r} (expected one of {HOST_SOURCES})")
    if imported is None:
        imported = import_trace(path, step)
    if idle_start:
        imported = replace(imported, ops=[o for o in imported.ops if o.family != PRIOR_FAMILY])
    graph = step_graph(imported, path)
    if mode == "measured":
        run_hw = replace(
            hw,
            launch_latency_s=max(0.0, imported.launch_latency_us) * 1e-6
            if imported.launch_latency_us is not None else hw.launch_latency_s,
            sync_s=max(0.0, imported.sync_return_us) * 1e-6 if imported.sync_return_us is not None else hw.sync_s,
        )
        timeline = measured_host(graph, imported, hw)
        costs = price(graph, run_hw, measured=True)
    else:
        run_hw = hw
        recorded = graph  # the trace's own host times, as `kernelsim run` on the imported workload keeps them
        if host == "trace":
            timeline = trace_host(graph, imported, hw, keep_profiler)
        else:
            if host_speed is None:
                timeline = model_host(graph, imported, hw, keep_profiler, 1.0)
            else:
                speed = trace_host_speed(imported, hw.trace_clock_us) if host_speed == "trace" else float(host_speed)
                timeline = model_host(graph, imported, at_host_speed(hw, speed), keep_profiler, speed)
        graph = timeline.graph
        costs = graph_member_costs(price(graph, hw), graph, imported, hw)
    trace = simulate(graph, costs, host_costs(run_hw))
    result = summarize(imported, trace, path, hw, mode, timeline)
    if mode == "predict":
        result["host"] = host_comparison(recorded, graph, costs, hw)
        # What the prediction took from the trace as measured rather than from the model.
        result["host_source"] = host
        if host == "model" and host_speed is not None and host_speed != 1.0:
            result["host_speed"] = round(timeline.host_speed, 4)
        profiler_us = timeline.profiler_removed_s * 1e6
        result["profiler_removed_us"] = round(profiler_us, 3)
        if unprofiled_us is not None:
            result["unprofiled_time_us"] = round(unprofiled_us, 3)
            result["unprofiled_error"] = (result["predicted_time_us"] - unprofiled_us) / unprofiled_us
        if host == "trace" and profiler_us > 0:
            result["profiler_event_us"] = round(timeline.per_event_s * 1e6, 3)
            result["trace_host_speed"] = round(timeline.host_speed, 4)
            result["notes"].append(
                f"the trace's host timeline is kept less the profiler's cost ({profiler_us:.1f} us of host time, "
                f"{timeline.per_event_s * 1e6:.2f} us per event at the trace's host speed "
                f"{timeline.host_speed:.2f}x the reference): the prediction is the step without the profiler, "
                "measured_time_us is the step as recorded with it")
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


def summarize(step: ImportedStep, trace: Trace, path: Path, hw: Hardware, mode: str,
              timeline: HostTimeline) -> dict[str, Any]:
    """The replay result; carried_/priced_ host time is `timeline`'s account, kernel time the costs'."""
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
    host_acc, kernel_acc = timeline.totals_us(), kernel_account_us(trace.costs)
    carried = {"carried_host_us": host_acc["carried_host_us"], "carried_kernel_us": kernel_acc["carried_kernel_us"],
               "priced_host_us": host_acc["priced_host_us"], "priced_kernel_us": kernel_acc["priced_kernel_us"]}
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


def trace_latency(step: ImportedStep, hw: Hardware, mode: str) -> float:
    if mode == "measured" and step.launch_latency_us is not None:
        return max(0.0, step.launch_latency_us)
    return hw.launch_latency_s * 1e6
