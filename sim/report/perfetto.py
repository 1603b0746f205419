"""Chrome/Perfetto trace JSON: one process per (hardware, variant, bucket) — and per rank of a
multi-rank run —, a track per host thread and per stream, kernels named with their limiter; flow arrows from launch to kernel.
Open the file at https://ui.perfetto.dev (or chrome://tracing)."""

from __future__ import annotations

from typing import Any

from sim.ranks import split_ranks
from sim.trace import HOST_TRACK, Trace


def _per_rank(traces: list[tuple[str, Trace]]) -> list[tuple[str, Trace]]:
    """A multi-rank trace (tracks 'rank R · …', sim.ranks) becomes one process per rank."""
    out: list[tuple[str, Trace]] = []
    for label, trace in traces:
        for rank, sub in split_ranks(trace):
            out.append((f"{label} / {rank}" if rank else label, sub))
    return out


def trace_events(traces: list[tuple[str, Trace]]) -> dict[str, Any]:
    events: list[dict[str, Any]] = []
    flow_id = 0
    for pid, (label, trace) in enumerate(_per_rank(traces), start=1):
        events.append({"ph": "M", "pid": pid, "tid": 0, "name": "process_name", "args": {"name": label}})
        tracks = sorted({iv.track for iv in trace.intervals}, key=lambda t: (t != HOST_TRACK, t))
        tids = {t: i for i, t in enumerate(tracks)}
        for t, tid in tids.items():
            events.append({"ph": "M", "pid": pid, "tid": tid, "name": "thread_name", "args": {"name": t}})
        launch_end: dict[int, float] = {}
        for iv in trace.intervals:
            # An op with measured host time (imported traces) has one "dispatch" interval that ends at its launch.
            if iv.track == HOST_TRACK and iv.cat in ("dispatch", "launch", "graph_launch", "compiled_call") and iv.op >= 0:
                launch_end[iv.op] = iv.end_s
        for iv in trace.intervals:
            args: dict[str, Any] = {"category": iv.cat}
            args.update(iv.args)
            if iv.track != HOST_TRACK and iv.op >= 0:
                op = trace.graph.ops[iv.op]
                cost = trace.costs[iv.op]
                args.update({"kind": op.kind, "phase": op.phase, "path": op.path})
                # Ops imported from a profiler trace: their family and the kernel's name there.
                for key in ("family", "trace_name", "measured_us", "unpriced"):
                    if key in op.attrs:
                        args[key] = op.attrs[key]
                if cost is not None:
                    args.update({"hbm_bytes": cost.hbm_bytes, "flops": cost.flops})
            events.append(
                {
                    "ph": "X",
                    "pid": pid,
                    "tid": tids[iv.track],
                    "name": iv.name,
                    "cat": iv.cat,
                    "ts": round(iv.start_s * 1e6, 4),
                    "dur": round(iv.duration_s * 1e6, 4),
                    "args": args,
                }
            )
            if iv.track != HOST_TRACK and iv.op in launch_end:
                flow_id += 1
                ts0 = round(launch_end[iv.op] * 1e6, 4)
                events.append({"ph": "s", "id": flow_id, "pid": pid, "tid": tids[HOST_TRACK], "ts": ts0,
                               "name": "launch", "cat": "flow"})
                events.append({"ph": "f", "bp": "e", "id": flow_id, "pid": pid, "tid": tids[iv.track],
                               "ts": round(iv.start_s * 1e6, 4), "name": "launch", "cat": "flow"})
    return {"traceEvents": events, "displayTimeUnit": "ns"}
