"""A simulated step as a PyTorch profiler (Kineto) trace, so tools that read Kineto traces (HTA,
kernelsim's own import-trace) can load it and compare it with a measured one.

Kineto's conventions: host events on the process (`cpu_op` for each op's dispatch, `cuda_runtime`
for each launch, with a `correlation` id), GPU activities on device 0 with `tid` = the stream
(`kernel`, `gpu_memcpy`), each carrying its launch's `correlation`, and `ac2g` flow events from
launch to kernel; a `ProfilerStep#1` annotation spans the step. Times are microseconds from 0.
"""

from __future__ import annotations

from typing import Any

from sim.trace import HOST_TRACK, Trace

HOST_PID, HOST_TID, DEVICE = 1, 1, 0
_LAUNCH_CATS = ("dispatch", "launch", "graph_launch", "compiled_call")
_RUNTIME_US = 3.0  # the runtime call at the end of a dispatch interval (Kineto shows it inside the op)


def _stream(track: str) -> int:
    return int(track.rsplit(" ", 1)[-1]) if track.rsplit(" ", 1)[-1].isdigit() else 0


def kineto_trace(trace: Trace, gpu: str, label: str) -> dict[str, Any]:
    """The Kineto JSON document of one simulated single-rank step."""
    us = 1e6
    events: list[dict[str, Any]] = [
        {"ph": "M", "pid": HOST_PID, "tid": 0, "name": "process_name", "args": {"name": f"kernelsim: {label}"}},
        {"ph": "M", "pid": DEVICE, "tid": 0, "name": "process_name", "args": {"name": f"GPU {DEVICE} ({gpu})"}},
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": HOST_PID, "tid": HOST_TID,
         "ts": 0.0, "dur": round(trace.end_s * us, 4), "args": {"External id": 0}},
    ]
    launch_of: dict[int, Any] = {}  # op → its host interval that ends in the launch
    for iv in trace.intervals:
        if iv.track == HOST_TRACK and iv.op >= 0 and iv.cat in _LAUNCH_CATS:
            launch_of[iv.op] = iv
    correlation: dict[int, int] = {}
    for iv in trace.intervals:
        if iv.track != HOST_TRACK:
            continue
        ts, dur = round(iv.start_s * us, 4), round(iv.duration_s * us, 4)
        if iv.cat == "sync":
            events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": HOST_PID,
                           "tid": HOST_TID, "ts": ts, "dur": dur, "args": {"correlation": 0}})
            continue
        events.append({"ph": "X", "cat": "cpu_op", "name": iv.name, "pid": HOST_PID, "tid": HOST_TID, "ts": ts,
                       "dur": dur, "args": {"External id": len(events), "kernelsim category": iv.cat}})
        if iv.op >= 0 and launch_of.get(iv.op) is iv:
            corr = len(correlation) + 1
            correlation[iv.op] = corr
            op = trace.graph.ops[iv.op]
            api = ("cudaGraphLaunch" if iv.cat == "graph_launch" else
                   "cudaMemcpyAsync" if op.kind == "copy" else "cudaLaunchKernel")
            call = min(_RUNTIME_US, iv.duration_s * us / 2)
            start = round(iv.end_s * us - call, 4)
            events.append({"ph": "X", "cat": "cuda_runtime", "name": api, "pid": HOST_PID, "tid": HOST_TID,
                           "ts": start, "dur": round(call, 4), "args": {"correlation": corr}})
            events.append({"ph": "s", "cat": "ac2g", "name": "ac2g", "id": corr, "pid": HOST_PID, "tid": HOST_TID,
                           "ts": start})
    for iv in trace.intervals:
        if iv.track == HOST_TRACK or iv.op < 0:
            continue
        op = trace.graph.ops[iv.op]
        cost = trace.costs[iv.op]
        stream = _stream(iv.track)
        corr = correlation.get(iv.op, 0)
        args: dict[str, Any] = {"device": DEVICE, "stream": stream, "correlation": corr,
                                "kernelsim kind": op.kind, "kernelsim category": iv.cat}
        cat = "gpu_memcpy" if op.kind == "copy" else "kernel"
        if cat == "kernel" and cost is not None:
            detail = dict(cost.detail)
            if "regs_per_thread" in detail:
                args["registers per thread"] = int(detail["regs_per_thread"])
        elif cost is not None:
            args["bytes"] = int(cost.hbm_bytes)
        ts = round(iv.start_s * us, 4)
        events.append({"ph": "X", "cat": cat, "name": iv.name, "pid": DEVICE, "tid": stream, "ts": ts,
                       "dur": round(iv.duration_s * us, 4), "args": args})
        if corr:
            events.append({"ph": "f", "bp": "e", "cat": "ac2g", "name": "ac2g", "id": corr, "pid": DEVICE,
                           "tid": stream, "ts": ts})
    return {"schemaVersion": 1, "deviceProperties": [{"id": DEVICE, "name": gpu}],
            "traceName": label, "displayTimeUnit": "ms", "traceEvents": events}
