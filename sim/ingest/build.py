"""Turn one step of a Kineto trace into a kernelsim workload (a plain dict in the workload schema).

The host timeline becomes ops in program order (the order of the runtime calls):
- every GPU activity (kernel, memcpy, memset) is one op; its `host_us` is the host time
  from the previous issue point to the start of the runtime call that launched it (a
  CUDA-graph launch issues all its kernels at once: the first carries the host time);
- host time not covered by any CPU op (Python between ops, data loading) longer than
  GAP_MIN_US becomes a `host` op, so that predict mode can keep it while it replaces
  per-op dispatch by the profile's;
- cudaStreamSynchronize/cudaDeviceSynchronize/cudaEventSynchronize, and a memcpy whose
  runtime call returned only after the copy ended (a blocking copy), become `sync` ops;
  one that returned while work launched earlier was still queued or running (it waited for
  one stream only; the engine's sync waits for all) becomes a `host` op of its duration;
- a cudaStreamWaitEvent makes the next kernel on the waiting stream wait (`after`) for
  the last kernel that the recorded stream had been given when the event was recorded;
- the stream's idle time before a kernel that was already queued (launched before its
  predecessor ended) is the device's per-kernel overhead: `device_gap_us`.
Work of earlier steps still running (or still queued) when the step starts is a `prior_work`
op per stream.
"""

from __future__ import annotations

import bisect
import re
import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sim.ingest.families import kernel_family
from sim.ingest.kineto import CpuOp, GpuActivity, RuntimeCall, StepEvents
from sim.ingest.shapes import infer_op

GAP_MIN_US = 5.0  # shorter gaps between ops are per-op dispatch (the profile's eager cost)
SYNC_CALLS = frozenset({"cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize",
                        "cuStreamSynchronize", "cuCtxSynchronize", "cuEventSynchronize"})
RECORD_CALLS = frozenset({"cudaEventRecord", "cudaEventRecordWithFlags", "cuEventRecord", "cuEventRecordWithFlags"})
WAIT_CALLS = frozenset({"cudaStreamWaitEvent", "cuStreamWaitEvent"})
GRAPH_CALLS = frozenset({"cudaGraphLaunch", "cuGraphLaunch"})
TRITON_CALLS = frozenset({"cuLaunchKernel", "cuLaunchKernelEx"})
PRIOR_FAMILY = "prior_work"
# The argument torch.compile's per-kernel profiler record carries (Inductor's _RecordFunctionFast).
KERNEL_RECORD_ARG = "kernel_backend"
# Used when the step has no clean sample of a plain kernel launch (e.g. only a CUDA-graph launch).
DEFAULT_LAUNCH_LATENCY_US = 5.0


@dataclass
class ImportedOp:
    """An op of the imported workload with what replay needs to know about it."""

    doc: dict[str, Any]
    family: str | None = None  # None for host and sync ops
    measured_us: float = 0.0
    launch_api: str = ""
    first_of_cpu_op: bool = True  # the first kernel launched under its top-level CPU op
    # What the host did since the previous issue point (set on the first kernel of a launch):
    host_events: int = 0  # events the profiler recorded (CPU ops, runtime/driver calls, Python frames)
    framework_ops: int = 0  # top-level CPU ops other than this kernel's own that launched no kernel
    autograd_nodes: int = 0  # of those, autograd engine backward nodes (ViewBackward0 ...)
    kept_host_us: float = 0.0  # measured time of kernel-less ops and non-launch runtime calls > KERNELLESS_WORK_US
    top_is_autograd_node: bool = False  # this kernel was launched by a backward node
    compiled_call: str = ""  # "forward" / "backward": the first kernel of a torch.compile region's call
    first_of_launching_op: bool = True  # the first kernel of its innermost enclosing CPU op (one dispatch)
    # Every event the profiler recorded in this op's host interval, long kernel-less ops included
    # (what `host_us`, or a host op's `duration_us`, holds of the profiler's own cost):
    trace_events: int = 0
    # Of those, the records torch.compile's generated code makes around each kernel launch when the
    # profiler is on (Python-side, with the kernel's arguments: far costlier than a dispatcher event)
    kernel_records: int = 0
    # Inside a compiled graph (forward region or compiled backward node): the framework op its wrapper
    # called for this kernel (aten::addmm, aten::_scaled_dot_product_cudnn_attention: an "extern" kernel,
    # dispatched like an eager op); "" for Triton kernels and outside compiled graphs.
    extern_op: str = ""
    first_of_extern: bool = False  # the first kernel of that op's call
    # Names (host-table keys, sim.costmodel.host.op_key) of the top-level CPU op that launched this
    # kernel, set on its first kernel, and of the kernel-less top-level ops since the previous
    # launch that predict mode prices (framework ops and backward nodes, not kept long ones):
    top_op: str = ""
    kernelless_ops: tuple[str, ...] = ()
    # A compiled forward region's first kernel in a training step: the tensors its AOTAutograd function
    # (CompiledFunction) takes, parameters and inputs (its recorded input shapes); 0 elsewhere or unknown
    compiled_inputs: int = 0
    call_us: float = 0.0  # the part of host_us spent inside the launching runtime call (up to the issue point)


@dataclass
class ImportedStep:
    events: StepEvents
    ops: list[ImportedOp]
    tensors: dict[str, dict[str, Any]]
    launch_latency_us: float | None
    sync_return_us: float | None
    training: bool
    notes: list[str] = field(default_factory=list)

    @property
    def measured_time_us(self) -> float:
        return self.events.measured_time_us

    def family_counts(self) -> Counter[str]:
        return Counter(o.family for o in self.ops if o.family and o.family != PRIOR_FAMILY)

    def unpriced(self) -> list[ImportedOp]:
        return [o for o in self.ops if o.doc.get("unpriced") and o.family != PRIOR_FAMILY]


def _name_part(s: str) -> str:
    s = re.sub(r"[^A-Za-z0-9_]+", "_", s.split("::")[-1]).strip("_")
    return (s or "op")[:40]


class _Coverage:
    """Union of CPU op intervals over all threads: how much of (a, b) the host spent inside ops."""

    def __init__(self, ops: list[CpuOp | RuntimeCall]) -> None:
        merged: list[list[float]] = []
        for o in sorted(ops, key=lambda o: o.ts):
            if merged and o.ts <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], o.end)
            else:
                merged.append([o.ts, o.end])
        self.starts = [m[0] for m in merged]
        self.ends = [m[1] for m in merged]
        self.cum = [0.0]
        for a, b in merged:
            self.cum.append(self.cum[-1] + b - a)

    def _upto(self, t: float) -> float:
        k = bisect.bisect_right(self.starts, t)
        if k == 0:
            return 0.0
        return self.cum[k - 1] + min(t, self.ends[k - 1]) - self.starts[k - 1]

    def uncovered(self, a: float, b: float) -> float:
        return max(0.0, (b - a) - (self._upto(b) - self._upto(a)))


def _stacks(cpu_ops: list[CpuOp], calls: list[RuntimeCall]) -> dict[int, list[CpuOp]]:
    """For each runtime call (by event index): the CPU ops enclosing it on its thread, outermost first."""
    by_tid: dict[int, list[CpuOp]] = {}
    for o in cpu_ops:
        by_tid.setdefault(o.tid, []).append(o)
    state: dict[int, tuple[list[CpuOp], int, list[CpuOp]]] = {}
    out: dict[int, list[CpuOp]] = {}
    for r in calls:
        ops, ptr, stack = state.get(r.tid, (by_tid.get(r.tid, []), 0, []))
        while ptr < len(ops) and ops[ptr].ts <= r.ts:
            o = ops[ptr]
            while stack and stack[-1].end < o.ts:
                stack.pop()
            stack.append(o)
            ptr += 1
        while stack and stack[-1].end < r.ts:
            stack.pop()
        state[r.tid] = (ops, ptr, stack)
        out[r.index] = [o for o in stack if o.end >= r.end - 1.0]
    return out


class _Busy:
    """Whether GPU work launched before a given time (in the step, or earlier steps' work) was still
    queued or running after it."""

    def __init__(self, ev: StepEvents) -> None:
        acts = sorted((r.ts, g.end) for r in ev.runtime for g in ev.launches.get(r.correlation, []))
        self.starts = [a for a, _ in acts]
        self.max_end: list[float] = []
        hi = max(ev.prior_busy.values(), default=float("-inf"))
        for _, end in acts:
            hi = max(hi, end)
            self.max_end.append(hi)
        self.prior_end = max(ev.prior_busy.values(), default=float("-inf"))

    def at(self, t: float) -> bool:
        """True when work launched before `t` ends more than a microsecond after it (a sync returning
        at `t` did not wait for it)."""
        k = bisect.bisect_left(self.starts, t)
        hi = self.max_end[k - 1] if k > 0 else self.prior_end
        return hi > t + 1.0


AUTOGRAD_NODE_PREFIX = "autograd::engine::evaluate_function"
COMPILED_FUNCTION = "CompiledFunction"  # AOTAutograd's autograd.Function around a compiled forward (training only)
COMPILED_REGION_PREFIX = "Torch-Compiled Region"  # torch.compile's frame (Dynamo guards, the compiled call)


# A kernel-less CPU op that takes longer than this is doing work of its own (CPU tensor math,
# data loading, a wait), not dispatching: predict mode keeps its measured time. Metadata ops
# (view, t, transpose, select) take 1-8 us even under the profiler with record_shapes.
KERNELLESS_WORK_US = 20.0


def _top_level(cpu_ops: list[CpuOp], transparent: set[int]) -> list[CpuOp]:
    """CPU ops not enclosed by another op of their thread, in start order (cpu_ops is sorted by
    (ts, -end)). Ops in `transparent` (annotations around launches) neither count nor enclose."""
    end_by_tid: dict[int, float] = {}
    out = []
    for o in cpu_ops:
        if o.index in transparent:
            continue
        if o.ts >= end_by_tid.get(o.tid, float("-inf")):
            out.append(o)
            end_by_tid[o.tid] = o.end
    return out


def _transparent(cpu_ops: list[CpuOp], calls: list[RuntimeCall]) -> set[int]:
    """User annotations (record_function ranges such as DistributedDataParallel.forward or a
    user's "forward") that enclose a runtime call: the ops inside them are the framework's."""
    ann = [o for o in cpu_ops if o.annotation]
    if not ann:
        return set()
    times: dict[int, list[float]] = {}
    for r in calls:
        times.setdefault(r.tid, []).append(r.ts)
    for v in times.values():
        v.sort()
    out = set()
    for o in ann:
        ts = times.get(o.tid, [])
        k = bisect.bisect_left(ts, o.ts)
        if k < len(ts) and ts[k] <= o.end:
            out.add(o.index)
    return out


class _Counts:
    """Events recorded in a host interval (a, b]: how many, and which top-level ops began in it."""

    def __init__(self, ev: StepEvents) -> None:
        self.times = sorted([o.ts for o in ev.cpu_ops] + [r.ts for r in ev.runtime] + list(ev.python_ts))
        self.record_times = sorted(o.ts for o in ev.cpu_ops if KERNEL_RECORD_ARG in o.args)
        self.transparent = _transparent(ev.cpu_ops, ev.runtime)
        self.tops = _top_level(ev.cpu_ops, self.transparent)
        self.top_ts = [o.ts for o in self.tops]
        # Runtime/driver calls that are neither launches nor syncs and take long (cudaMalloc
        # growing the cache, cudaFree, context or cuDNN initialisation): work the profile's
        # steady-state dispatch costs do not contain.
        self.slow_calls = [r for r in ev.runtime if r.end - r.ts > KERNELLESS_WORK_US
                           and r.correlation not in ev.launches and r.name not in SYNC_CALLS]
        self.slow_ts = [r.ts for r in self.slow_calls]

    def events(self, a: float, b: float) -> int:
        return bisect.bisect_right(self.times, b) - bisect.bisect_right(self.times, a)

    def kernel_records(self, a: float, b: float) -> int:
        return bisect.bisect_right(self.record_times, b) - bisect.bisect_right(self.record_times, a)

    def slow(self, a: float, b: float) -> list[RuntimeCall]:
        return self.slow_calls[bisect.bisect_right(self.slow_ts, a):bisect.bisect_right(self.slow_ts, b)]

    def top_ops(self, a: float, b: float) -> list[CpuOp]:
        return self.tops[bisect.bisect_right(self.top_ts, a):bisect.bisect_right(self.top_ts, b)]


def _phase(stack: list[CpuOp]) -> str:
    names = " ".join(o.name for o in stack)
    if "Optimizer" in names or "optimizer" in names:
        return "optimizer"
    if "Backward" in names or "autograd::engine" in names:
        return "backward"
    return "forward"


def build_step(ev: StepEvents) -> ImportedStep:
    t0 = ev.step.ts
    stacks = _stacks(ev.cpu_ops, ev.runtime)
    cover = _Coverage([*ev.cpu_ops, *ev.runtime])
    counts = _Counts(ev)
    latency, api_offset = _launch_latency(ev)
    sync_by_corr: dict[int, list[Any]] = {}
    for s in ev.syncs:
        sync_by_corr.setdefault(s.correlation, []).append(s)
    waiter_of_record = {s.wait_on_record_corr: s for s in ev.syncs if s.wait_on_record_corr > 0}
    training = any("Backward" in o.name or "autograd::engine" in o.name for o in ev.cpu_ops)

    # A CPU op that launches several kernels of one family (an attention backward and its
    # helpers, a split-K GEMM and its reduction) gives its shapes to the longest one only;
    # the others keep their measured time (pricing each as the whole op would count it twice).
    shaped: dict[tuple[int, str], GpuActivity] = {}
    for r in ev.runtime:
        enclosing = stacks.get(r.index)
        if not enclosing:
            continue
        for act in ev.launches.get(r.correlation, []):
            key = (enclosing[-1].index, kernel_family(act.name, act.cat))
            if key not in shaped or act.end - act.ts > shaped[key].end - shaped[key].ts:
                shaped[key] = act

    ops: list[ImportedOp] = []
    tensors: dict[str, dict[str, Any]] = {}
    act_of_op: dict[str, GpuActivity] = {}
    call_of_op: dict[str, RuntimeCall] = {}
    last_op_on_stream: dict[int, str] = {}
    op_stream: dict[str, int] = {}
    # cudaEventRecord correlation → (recorded stream if known, each stream's last op at that moment)
    recorded: dict[int, tuple[int | None, dict[int, str]]] = {}
    last_record: int | None = None
    # (waiting stream or None = the next kernel's, recorded stream or None = guess, snapshot)
    pending_waits: list[tuple[int | None, int | None, dict[int, str]]] = []
    op_seq: dict[str, int] = {}
    notes: list[str] = []
    heuristic_waits = 0
    partial_syncs = 0
    gpu_busy = _Busy(ev)
    counter = 0
    cursor = t0
    last_top: int | None = None
    last_leaf: int | None = None
    last_extern: int | None = None

    for stream, busy_end in sorted(ev.prior_busy.items()):
        name = f"prior_work_s{stream}"
        ops.append(ImportedOp({"name": name, "kind": "elementwise", "stream": stream, "unpriced": True,
                               "measured_us": round(busy_end - t0, 3), "host_us": 0.0, "family": PRIOR_FAMILY},
                              family=PRIOR_FAMILY, measured_us=busy_end - t0))
        last_op_on_stream[stream] = name
        op_stream[name] = stream
        notes.append(f"stream {stream} was still running earlier steps' work for {busy_end - t0:.1f} us")

    def host_before(at: float) -> tuple[float, float]:
        """(host time since the cursor, the part of it outside any CPU op)."""
        total = max(0.0, at - cursor)
        return total, cover.uncovered(cursor, at) if total > 0 else 0.0

    def emit_host(duration: float, label: str, events: int = 0) -> None:
        nonlocal counter
        counter += 1
        ops.append(ImportedOp({"name": f"host{counter:04d}_{label}", "kind": "host",
                               "duration_us": round(duration, 3)}, trace_events=max(0, events)))

    for r in ev.runtime:
        acts = ev.launches.get(r.correlation)
        if acts:
            # The issue point: where the engine's (single) launch latency must start for this API.
            issue = r.ts + min(api_offset.get(r.name, 0.0), r.end - r.ts)
            total, gap = host_before(issue)
            if gap >= GAP_MIN_US:
                emit_host(gap, "gap")
                total -= gap
            stack = stacks.get(r.index, [])
            framed = [o for o in stack if o.index not in counts.transparent]
            top = framed[0].index if framed else None
            first_of_top = top is None or top != last_top
            last_top = top
            leaf = stack[-1].index if stack else None
            first_of_leaf = leaf is None or leaf != last_leaf
            last_leaf = leaf
            extern = None
            if framed and (framed[0].name.startswith(COMPILED_REGION_PREFIX) or "CompiledFunctionBackward" in framed[0].name):
                extern = next((o for o in framed[1:] if o.name.startswith("aten::")), None)
            first_of_extern = extern is not None and extern.index != last_extern
            last_extern = extern.index if extern is not None else last_extern
            kernelless = [o for o in counts.top_ops(cursor, issue) if o.index != top]
            n_nodes = sum(1 for o in kernelless if o.name.startswith(AUTOGRAD_NODE_PREFIX))
            n_events = all_events = counts.events(cursor, issue)
            working = [o for o in kernelless if not o.name.startswith(AUTOGRAD_NODE_PREFIX)
                       and o.end - o.ts > KERNELLESS_WORK_US]
            kept_us = sum(o.end - o.ts for o in working)
            kept_us += sum(c.end - c.ts for c in counts.slow(cursor, issue)
                           if not any(o.ts <= c.ts <= o.end for o in working))
            n_events -= sum(counts.events(o.ts - 1e-6, o.end) for o in working)  # their cost is in kept_us
            n_framework = len(kernelless) - n_nodes - len(working)
            by_node = bool(framed) and framed[0].name.startswith(AUTOGRAD_NODE_PREFIX)
            compiled = ""
            if first_of_top and framed:
                if framed[0].name.startswith(COMPILED_REGION_PREFIX):
                    compiled = "forward"
                elif by_node and "CompiledFunctionBackward" in framed[0].name:
                    compiled = "backward"
            inner = _name_part(stack[-1].name) if stack else _name_part(r.name)
            for j, act in enumerate(acts):
                counter += 1
                family = kernel_family(act.name, act.cat)
                name = f"k{counter:04d}_{family}_{inner}"
                helper = bool(stack) and shaped.get((stack[-1].index, family)) is not act
                inf = None if helper else infer_op(family, stack, act, name)
                doc: dict[str, Any] = {"name": name}
                if inf is not None:
                    doc.update(inf.fields)
                    if inf.reads:
                        doc["reads"] = inf.reads
                    if inf.writes:
                        doc["writes"] = inf.writes
                    tensors.update(inf.tensors)
                else:
                    doc["kind"] = "copy" if family == "copy" else "elementwise"
                    doc["unpriced"] = True
                doc["stream"] = act.stream
                after: list[str] = []
                still: list[tuple[int | None, int | None, dict[int, str]]] = []
                for ws, rs, snapshot in pending_waits:
                    if ws is not None and ws != act.stream:
                        still.append((ws, rs, snapshot))
                        continue
                    if rs is not None:
                        dep = snapshot.get(rs)
                    else:  # the recorded stream is unknown: the other stream launched to most recently
                        others = [n for st_, n in snapshot.items() if st_ != act.stream]
                        dep = max(others, key=lambda n: op_seq.get(n, -1), default=None)
                    if dep is not None and dep not in after and op_stream.get(dep) != act.stream:
                        after.append(dep)
                pending_waits = still
                if after:
                    doc["after"] = after
                doc["phase"] = _phase(stack)
                launch = {k: v for k, v in (("grid", act.grid), ("block", act.block), ("regs_per_thread", act.regs),
                                            ("smem_per_block", act.smem)) if v is not None}
                if act.cat == "kernel" and launch.get("grid") and launch.get("block"):
                    doc["launch"] = launch
                doc["measured_us"] = round(act.end - act.ts, 3)
                doc["host_us"] = round(total, 3) if j == 0 else 0.0
                doc["family"] = family
                doc["correlation"] = r.correlation
                doc["trace_name"] = act.name[:300]
                ops.append(ImportedOp(doc, family=family, measured_us=act.end - act.ts, launch_api=r.name,
                                      first_of_cpu_op=first_of_top and j == 0, first_of_launching_op=first_of_leaf and j == 0,
                                      host_events=max(0, n_events) if j == 0 else 0,
                                      trace_events=all_events if j == 0 else 0,
                                      kernel_records=counts.kernel_records(cursor, issue) if j == 0 else 0,
                                      extern_op=extern.name if extern is not None else "",
                                      first_of_extern=first_of_extern and j == 0,
                                      framework_ops=n_framework if j == 0 else 0,
                                      kept_host_us=kept_us if j == 0 else 0.0,
                                      compiled_call=compiled if j == 0 else "",
                                      compiled_inputs=next((len(o.input_dims or []) for o in framed
                                                            if o.name == COMPILED_FUNCTION), 0)
                                      if compiled == "forward" and j == 0 else 0,
                                      autograd_nodes=n_nodes if j == 0 else 0, top_is_autograd_node=by_node,
                                      top_op=framed[0].name if framed and first_of_top and j == 0 else "",
                                      call_us=issue - r.ts if j == 0 else 0.0,
                                      kernelless_ops=tuple(o.name for o in kernelless if all(o.index != w.index for w in working))
                                      if j == 0 else ()))
                act_of_op[name] = act
                call_of_op[name] = r
                last_op_on_stream[act.stream] = name
                op_stream[name] = act.stream
                op_seq[name] = counter
            cursor = max(cursor, issue)
            blocking = [a for a in acts if a.cat != "kernel" and r.end >= a.end - 1.0 and r.name not in GRAPH_CALLS]
            if blocking and gpu_busy.at(r.end):
                emit_host(r.end - issue, "blocking_copy")
                partial_syncs += 1
                cursor = max(cursor, r.end)
            elif blocking:
                counter += 1
                ops.append(ImportedOp({"name": f"sync{counter:04d}_{_name_part(r.name)}", "kind": "sync"}))
                cursor = max(cursor, r.end)
        elif r.name in SYNC_CALLS:
            total, _ = host_before(r.ts)
            if total > 0:
                emit_host(total, "before_sync", counts.events(cursor, r.ts))
            if gpu_busy.at(r.end):
                emit_host(r.end - r.ts, _name_part(r.name), 1)
                partial_syncs += 1
            else:
                counter += 1
                ops.append(ImportedOp({"name": f"sync{counter:04d}_{_name_part(r.name)}", "kind": "sync"}))
            cursor = max(cursor, r.end)
        elif r.name in RECORD_CALLS:
            waiter = waiter_of_record.get(r.correlation)
            rec_stream = waiter.wait_on_stream if waiter is not None and waiter.wait_on_stream >= 0 else None
            recorded[r.correlation] = (rec_stream, dict(last_op_on_stream))
            last_record = r.correlation
        elif r.name in WAIT_CALLS:
            recs = sync_by_corr.get(r.correlation, [])
            waiting = recs[0].stream if recs and recs[0].stream >= 0 else None
            if recs and recs[0].wait_on_record_corr in recorded:
                rec_stream, snapshot = recorded[recs[0].wait_on_record_corr]
                if rec_stream is None and recs[0].wait_on_stream >= 0:
                    rec_stream = recs[0].wait_on_stream
            elif last_record is not None:
                rec_stream, snapshot = recorded[last_record]
            else:
                continue
            if rec_stream is None or waiting is None:
                heuristic_waits += 1
            pending_waits.append((waiting, rec_stream, snapshot))
    if partial_syncs:
        notes.append(f"{partial_syncs} sync(s) returned while another stream was still busy (a stream or event sync, "
                     "or a blocking copy): replayed as host waits of their measured duration, since the engine's "
                     "sync waits for every stream")
    if heuristic_waits:
        notes.append(f"{heuristic_waits} cudaStreamWaitEvent(s) matched by heuristics (no cuda_sync record names "
                     "both streams: the waiting stream is the next kernel's, the recorded one the other stream "
                     "launched to last)")
    # Nothing after the last GPU launch changes the step time (it ends with the last GPU activity).
    while ops and ops[-1].family is None:
        ops.pop()

    if latency is None or not any(k not in GRAPH_CALLS for k in api_offset):
        notes.append(f"no clean sample of a plain kernel launch: launch latency {DEFAULT_LAUNCH_LATENCY_US} us "
                     "assumed")
        latency = DEFAULT_LAUNCH_LATENCY_US if latency is None else latency
    sync_ret = _device_timing(ev, ops, act_of_op, call_of_op, latency, api_offset)
    if len(api_offset) > 1:
        notes.append("launch latency by API (runtime call start to GPU start, idle stream): " + ", ".join(
            f"{k} {v + (latency or 0.0):.1f} us" for k, v in sorted(api_offset.items())))
    return ImportedStep(events=ev, ops=ops, tensors=tensors, launch_latency_us=latency, sync_return_us=sync_ret,
                        training=training, notes=notes)


def _device_timing(ev: StepEvents, ops: list[ImportedOp], act_of_op: dict[str, GpuActivity],
                   call_of_op: dict[str, RuntimeCall], latency: float | None,
                   api_offset: dict[str, float]) -> float | None:
    """Fill `device_gap_us` per kernel; estimate the sync return time from the trace.

    A kernel's gap is the time it started after everything the replay knows of allowed it:
    its predecessor on the stream, the kernels it waits for, and its launch (issue point
    plus launch latency). For a kernel queued behind another that is the device's
    per-kernel overhead; for one on an idle stream it is SMs held by another stream's
    kernel (or a dependency the trace does not show).
    """
    prev_end: dict[int, float] = dict(ev.prior_busy)
    base = latency if latency is not None else DEFAULT_LAUNCH_LATENCY_US
    ordered = sorted((act_of_op[o.doc["name"]].ts, i) for i, o in enumerate(ops) if o.doc["name"] in act_of_op)
    for _, i in ordered:
        o = ops[i]
        act, call = act_of_op[o.doc["name"]], call_of_op[o.doc["name"]]
        dep_end = max((act_of_op[d].end for d in o.doc.get("after", []) if d in act_of_op), default=float("-inf"))
        pe = prev_end.get(act.stream, float("-inf"))
        launched = call.ts + min(api_offset.get(call.name, 0.0), call.end - call.ts) + base
        gap = act.ts - max(pe, dep_end, launched)
        if gap > 0.0005:
            o.doc["device_gap_us"] = round(gap, 3)
        prev_end[act.stream] = max(pe, act.end)
    sync_returns: list[float] = []
    gpu_ends = sorted(g.end for g in ev.gpu)
    for r in ev.runtime:
        if r.name in SYNC_CALLS:
            k = bisect.bisect_right(gpu_ends, r.end) - 1
            idle = max(r.ts, gpu_ends[k]) if k >= 0 else r.ts
            sync_returns.append(r.end - idle)
    return statistics.median(sync_returns) if sync_returns else None


def _launch_latency(ev: StepEvents) -> tuple[float | None, dict[str, float]]:
    """The launch latency (runtime call start → GPU start on an idle GPU): the smallest median over
    plain launch APIs; and for every API how much later than that its work starts (a graph
    launch's kernels start near the end of its long call, a kernel launch's a few microseconds
    after its start)."""
    # Only clean samples: the whole GPU idle from the call to the start (no stream order, no
    # cross-stream wait, no SMs held by another stream's kernel in between).
    busy_until = max(ev.prior_busy.values(), default=float("-inf"))
    by_call = {r.correlation: r for r in ev.runtime}
    samples: dict[str, list[float]] = {}
    first_seen: set[int] = set()
    for act in ev.gpu:
        call = by_call[act.correlation]
        if call.correlation not in first_seen and busy_until < call.ts:
            samples.setdefault(call.name, []).append(act.ts - call.ts)
        first_seen.add(call.correlation)
        busy_until = max(busy_until, act.end)
    medians = {k: statistics.median(v) for k, v in samples.items()}
    plain = {k: v for k, v in medians.items() if k not in GRAPH_CALLS}
    if not medians:
        return None, {}
    base = min(plain.values()) if plain else DEFAULT_LAUNCH_LATENCY_US
    return base, {k: max(0.0, v - base) for k, v in medians.items()}


def workload_doc(step: ImportedStep, source: Path) -> dict[str, Any]:
    """The workload file for an imported step (schema kernelsim.workload/v1)."""
    ev = step.events
    fam = step.family_counts()
    desc = (f"imported from {source.name}, {ev.step.name}: measured step {step.measured_time_us:.1f} us, "
            f"{sum(fam.values())} GPU activities ({', '.join(f'{k} {v}' for k, v in sorted(fam.items()))}), "
            f"{len(step.unpriced())} unpriced")
    if step.launch_latency_us is not None:
        desc += f"; measured launch latency {step.launch_latency_us:.2f} us"
    stem = re.sub(r"[^A-Za-z0-9_]+", "_", source.name.split(".")[0]) or "trace"
    return {
        "schema": "kernelsim.workload/v1",
        "name": stem,
        "kind": "training" if step.training else "serving",
        "description": desc,
        "mode": "eager",
        "parameters": {},
        "distribution": {"buckets": [{"params": {}, "weight": 1.0, "name": ev.step.name.replace("#", "")}]},
        "tensors": step.tensors,
        "ops": [o.doc for o in step.ops],
    }
