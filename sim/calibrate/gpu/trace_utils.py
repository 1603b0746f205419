"""Reading torch.profiler (Kineto) Chrome traces: kernel lists and kernel-to-label maps."""

from __future__ import annotations

import bisect
import gzip
import json
import os
import tempfile
from typing import Any

GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def export_trace(prof: Any, path: str | None = None) -> dict[str, Any]:
    """Export a finished torch.profiler.profile to Chrome JSON and load it."""
    own = path is None
    if own:
        fd, path = tempfile.mkstemp(suffix=".json")
        os.close(fd)
    prof.export_chrome_trace(path)
    with open(path) as f:
        trace = json.load(f)
    if own:
        os.unlink(path)
    return trace


def load_trace(path: str) -> dict[str, Any]:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)


def gpu_events(trace: dict[str, Any]) -> list[dict[str, Any]]:
    """Kernels, memcpys and memsets in start order, with Kineto's launch data from args."""
    out = []
    for ev in trace.get("traceEvents", []):
        if ev.get("ph") != "X" or ev.get("cat") not in GPU_CATS:
            continue
        a = ev.get("args", {})
        rec: dict[str, Any] = {
            "kind": ev["cat"],
            "name": ev.get("name"),
            "ts_us": float(ev.get("ts", 0.0)),
            "duration_us": float(ev.get("dur", 0.0)),
            "stream": a.get("stream"),
            "correlation": a.get("correlation"),
        }
        if ev["cat"] == "kernel":
            rec.update({
                "grid": a.get("grid"),
                "block": a.get("block"),
                "registers_per_thread": a.get("registers per thread"),
                "shared_memory_bytes": a.get("shared memory"),
                "blocks_per_sm": a.get("blocks per SM"),
                "warps_per_sm": a.get("warps per SM"),
                "est_occupancy_pct": a.get("est. achieved occupancy %"),
            })
        else:
            rec["bytes"] = a.get("bytes")
            rec["memory_bandwidth_gbps"] = a.get("memory bandwidth (GB/s)")
        out.append(rec)
    out.sort(key=lambda r: r["ts_us"])
    return out


def compact_kernel_list(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Kernel list relative to the first GPU event, names cut to 160 chars, None dropped."""
    if not events:
        return []
    t0 = events[0]["ts_us"]
    out = []
    for r in events:
        c = {k: v for k, v in r.items() if v is not None and k not in ("correlation",)}
        c["ts_us"] = round(r["ts_us"] - t0, 3)
        c["name"] = (r["name"] or "")[:160]
        out.append(c)
    return out


def runtime_events(trace: dict[str, Any]) -> list[dict[str, Any]]:
    """CUDA runtime/driver API events (cudaLaunchKernel, cuLaunchKernelEx, ...)."""
    return [ev for ev in trace.get("traceEvents", [])
            if ev.get("ph") == "X" and ev.get("cat") in ("cuda_runtime", "cuda_driver")]


def kernels_by_annotation(trace: dict[str, Any], prefix: str) -> dict[str, list[dict[str, Any]]]:
    """Map each record_function label starting with prefix to the GPU events it launched
    (runtime call inside the label's CPU interval -> correlation id -> GPU event)."""
    ann = sorted(
        (float(ev["ts"]), float(ev["ts"]) + float(ev.get("dur", 0)), ev["name"])
        for ev in trace.get("traceEvents", [])
        if ev.get("ph") == "X" and ev.get("cat") == "user_annotation" and str(ev.get("name", "")).startswith(prefix)
    )
    starts = [a[0] for a in ann]
    corr_to_label: dict[Any, str] = {}
    for ev in runtime_events(trace):
        ts = float(ev["ts"])
        i = bisect.bisect_right(starts, ts) - 1
        if i >= 0 and ts <= ann[i][1]:
            corr = ev.get("args", {}).get("correlation")
            if corr is not None:
                corr_to_label[corr] = ann[i][2]
    out: dict[str, list[dict[str, Any]]] = {a[2]: [] for a in ann}
    for g in gpu_events(trace):
        lab = corr_to_label.get(g["correlation"])
        if lab is not None:
            out[lab].append(g)
    return out


def step_windows(trace: dict[str, Any]) -> list[tuple[str, float, float]]:
    """ProfilerStep#N CPU intervals (name, start_us, end_us), in order."""
    return sorted(
        ((ev["name"], float(ev["ts"]), float(ev["ts"]) + float(ev.get("dur", 0)))
         for ev in trace.get("traceEvents", [])
         if ev.get("ph") == "X" and str(ev.get("name", "")).startswith("ProfilerStep#")),
        key=lambda t: t[1],
    )
