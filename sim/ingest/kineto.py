"""Read a PyTorch profiler (Kineto) trace: pick one step, keep its events, link launches to GPU work.

Two streaming passes over the file (sim.ingest.jsonstream), so memory is bounded by one
step, not by the file:
1. step markers (`ProfilerStep#N` annotations), the time span of CPU ops (for a trace with
   no markers: the whole trace), and every runtime call's (time, correlation id) packed in
   arrays (16 bytes per launch);
2. the chosen step's CPU ops and runtime/driver calls, the GPU activities (kernels,
   memcpys, memsets, CUDA sync records) whose launch lies in the step, and GPU activities
   that run inside the step with no launch anywhere in the trace (an error).

Malformed input is an InputError naming the event index and name: an unknown event type
(`ph`), a missing or mistyped field, a GPU activity that starts before its launch, a
kernel with no launch.
"""

from __future__ import annotations

import bisect
import math
import re
from array import array
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sim.errors import InputError
from sim.ingest.jsonstream import iter_events
from sim.limits import MAX_JSON_DEPTH, MAX_TRACE_INT, MAX_TRACE_NUMBER

# The Chrome trace event format's event types (`ph`).
KNOWN_PH = frozenset("BEXiIbneSTpFsftPOND" "MVvRc()C")
CPU_CATS = frozenset({"cpu_op", "operator", "user_annotation"})
RUNTIME_CATS = frozenset({"cuda_runtime", "cuda_driver", "runtime", "driver"})
GPU_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset"})
SYNC_CAT = "cuda_sync"
# Categories that carry nothing the importer needs; any other category is counted as unknown.
IGNORED_CATS = frozenset({
    "python_function", "gpu_user_annotation", "ac2g", "fwdbwd", "overhead", "trace", "cpu_instant_event",
    "cuda_profiler_range", "global", "", "flow", "kineto", "pytorch", "python", "gpu_op",
})
# Runtime/driver calls that launch GPU work: these must carry a correlation id.
LAUNCH_CALLS = frozenset({
    "cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx", "cudaLaunchCooperativeKernel",
    "cudaMemcpyAsync", "cudaMemcpy", "cudaMemsetAsync", "cudaMemset", "cudaGraphLaunch", "cuGraphLaunch",
})
CLOCK_SLACK_US = 2.0  # CPU and GPU clocks are aligned by Kineto to about a microsecond
_STEP_RX = re.compile(r"^ProfilerStep#(\d+)$")


@dataclass(slots=True)
class CpuOp:
    index: int
    name: str
    ts: float
    end: float
    tid: int
    input_dims: list[Any] | None
    input_types: list[Any] | None
    concrete: list[Any] | None
    args: dict[str, Any]
    annotation: bool = False  # a user_annotation (record_function range), not a framework op
    input_strides: list[Any] | None = None  # per input, its strides in elements (a GEMM's layout), when recorded


@dataclass(slots=True)
class RuntimeCall:
    index: int
    name: str
    ts: float
    end: float
    tid: int
    correlation: int


@dataclass(slots=True)
class GpuActivity:
    index: int
    name: str
    cat: str  # kernel | gpu_memcpy | gpu_memset
    ts: float
    end: float
    stream: int
    correlation: int
    grid: int | None = None
    block: int | None = None
    regs: int | None = None
    smem: int | None = None
    bytes: float | None = None


@dataclass(slots=True)
class SyncRecord:
    """A CUPTI synchronization record (Kineto category `cuda_sync`, needs `enable_cuda_sync_events`)."""

    index: int
    kind: str  # "Stream Wait Event", "Event Sync", "Stream Sync", "Context Sync"
    ts: float
    end: float
    stream: int
    correlation: int
    wait_on_stream: int
    wait_on_record_corr: int


@dataclass(frozen=True)
class Step:
    name: str
    ts: float
    end: float
    index: int


@dataclass
class StepEvents:
    """The events of one step, with GPU activities linked to the runtime call that launched them."""

    file: str
    step: Step
    steps: list[Step]
    cpu_ops: list[CpuOp]
    runtime: list[RuntimeCall]
    gpu: list[GpuActivity]
    syncs: list[SyncRecord]
    launches: dict[int, list[GpuActivity]]  # correlation → activities it launched (several for a graph)
    unknown_categories: Counter[str] = field(default_factory=Counter)
    meta: dict[str, Any] = field(default_factory=dict)
    prior_busy: dict[int, float] = field(default_factory=dict)  # stream → end of earlier steps' work
    python_ts: list[float] = field(default_factory=list)  # start of each python_function event (with_stack)

    @property
    def measured_end(self) -> float:
        return max(g.end for g in self.gpu)

    @property
    def measured_time_us(self) -> float:
        return self.measured_end - self.step.ts


def _bad(file: str, index: int, ev: dict[str, Any], problem: str, *, value: object = None,
         expected: str | None = None) -> InputError:
    name = ev.get("name")
    where = f"traceEvents[{index}]" + (f" ({name!r})" if isinstance(name, str) else "")
    return InputError(problem, file=file, path=where, value=value, expected=expected)


def _num(file: str, index: int, ev: dict[str, Any], key: str) -> float:
    v = ev.get(key)
    if v is None:
        raise _bad(file, index, ev, f"missing field '{key}'", expected="a number")
    if isinstance(v, bool) or not isinstance(v, int | float):
        # Some exporters write ts as a string with three decimals ("12345.678").
        if isinstance(v, str) and len(v) <= 40:
            try:
                f = float(v)
            except ValueError:
                pass
            else:
                if math.isfinite(f) and abs(f) <= MAX_TRACE_NUMBER:
                    return f
        raise _bad(file, index, ev, f"field '{key}' is not a number", value=v)
    if isinstance(v, int) and abs(v) > MAX_TRACE_NUMBER or isinstance(v, float) and not abs(v) <= MAX_TRACE_NUMBER:
        raise _bad(file, index, ev, f"field '{key}' is out of range", value=v,
                   expected=f"a finite number of magnitude at most {MAX_TRACE_NUMBER:.0e}")
    return float(v)


def _args(file: str, index: int, ev: dict[str, Any]) -> dict[str, Any]:
    """The event's `args` object ({} when absent); anything else is an error naming the event."""
    args = ev.get("args")
    if args is None:
        return {}
    if not isinstance(args, dict):
        raise _bad(file, index, ev, "field 'args' is not an object", value=args, expected='{"key": value, ...}')
    return args


def _arg_int(file: str, index: int, ev: dict[str, Any], key: str, *, required: bool,
             minimum: int | None = None) -> int | None:
    v = _args(file, index, ev).get(key)
    if v is None:
        if required:
            raise _bad(file, index, ev, f"missing field 'args.{key}'", expected="an integer")
        return None
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise _bad(file, index, ev, f"field 'args.{key}' is not a number", value=v)
    if not abs(v) <= MAX_TRACE_INT or v != int(v):
        raise _bad(file, index, ev, f"field 'args.{key}' is not an integer in range", value=v,
                   expected="a whole number of magnitude at most 2**62")
    if minimum is not None and v < minimum:
        raise _bad(file, index, ev, f"field 'args.{key}' must be >= {minimum}", value=v)
    return int(v)


def _list_arg(file: str, index: int, ev: dict[str, Any], args: dict[str, Any], key: str) -> list[Any] | None:
    """An optional list argument (`Input Dims`, ...): a list nested at most MAX_JSON_DEPTH deep, or absent."""
    v = args.get(key)
    if v is None:
        return None
    if not isinstance(v, list):
        raise _bad(file, index, ev, f"field 'args.{key}' is not a list", value=v, expected="a JSON array")
    stack: list[tuple[Any, int]] = [(v, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            raise _bad(file, index, ev, f"field 'args.{key}' is nested more than {MAX_JSON_DEPTH} levels deep")
        if isinstance(item, list):
            stack.extend((x, depth + 1) for x in item)
        elif isinstance(item, dict):
            stack.extend((x, depth + 1) for x in item.values())
        elif isinstance(item, int) and not isinstance(item, bool) and abs(item) > MAX_TRACE_INT:
            raise _bad(file, index, ev, f"field 'args.{key}' holds an integer out of range", value=item,
                       expected="a magnitude at most 2**62")
        elif isinstance(item, float) and not math.isfinite(item):
            raise _bad(file, index, ev, f"field 'args.{key}' holds a number that is not finite", value=item)
    return v


def _dim3(file: str, index: int, ev: dict[str, Any], key: str) -> int | None:
    v = _args(file, index, ev).get(key)
    if v is None:
        return None
    if isinstance(v, list) and 0 < len(v) <= 3 and all(type(x) is int and 1 <= x <= 2**31 for x in v):
        n = 1
        for x in v:
            n *= x
        return n
    if type(v) is int and 1 <= v <= 2**31:
        return v
    raise _bad(file, index, ev, f"field 'args.{key}' is not a launch dimension", value=v,
               expected="a list of positive integers like [128, 1, 1]")


def _tid(ev: dict[str, Any]) -> int:
    tid = ev.get("tid", 0)
    if isinstance(tid, int) and abs(tid) <= MAX_TRACE_INT:
        return tid
    digits = re.sub(r"\D", "", str(tid)[:100])[:18]  # some exporters write "thread 12 (python)"
    return int(digits) if digits else 0


def _cat(ev: dict[str, Any]) -> str:
    c = ev.get("cat")
    return c.lower() if isinstance(c, str) else ""


def _check_event(file: str, index: int, ev: dict[str, Any]) -> str:
    ph = ev.get("ph")
    if not isinstance(ph, str) or ph not in KNOWN_PH:
        raise _bad(file, index, ev, "unknown event type", value=ph,
                   expected="a Chrome trace event type ('X', 'i', 's', 'f', 'M', ...)")
    return ph


def _scan(path: Path) -> tuple[list[Step], float, float, array, array, array, dict[str, Any]]:
    """Pass 1: step markers, the CPU span, every runtime call's (ts, correlation) and every GPU
    activity's correlation (to tell which steps launch GPU work when the chosen one launches none)."""
    file = str(path)
    steps: list[Step] = []
    cpu_lo, cpu_hi = float("inf"), float("-inf")
    rt_ts, rt_corr, gpu_corr = array("d"), array("q"), array("q")
    meta: dict[str, Any] = {}
    for i, ev in enumerate(iter_events(path, meta)):
        ph = _check_event(file, i, ev)
        if ph != "X":
            continue
        _args(file, i, ev)  # every complete event's args is an object (or absent), in any step
        cat = _cat(ev)
        if cat in CPU_CATS:
            ts, dur = _num(file, i, ev, "ts"), _num(file, i, ev, "dur")
            if dur < 0:
                raise _bad(file, i, ev, "negative duration", value=dur)
            name = ev.get("name")
            if isinstance(name, str) and _STEP_RX.match(name):
                steps.append(Step(name, ts, ts + dur, i))
            cpu_lo, cpu_hi = min(cpu_lo, ts), max(cpu_hi, ts + dur)
        elif cat in RUNTIME_CATS:
            corr = _arg_int(file, i, ev, "correlation", required=False)
            if corr is not None and corr > 0:
                rt_ts.append(_num(file, i, ev, "ts"))
                rt_corr.append(corr)
        elif cat in GPU_CATS:
            _num(file, i, ev, "ts"), _num(file, i, ev, "dur")
            corr = _args(file, i, ev).get("correlation")
            if isinstance(corr, int | float) and not isinstance(corr, bool) and abs(corr) <= MAX_TRACE_INT:
                gpu_corr.append(int(corr))
    steps.sort(key=lambda s: s.ts)
    return steps, cpu_lo, cpu_hi, rt_ts, rt_corr, gpu_corr, meta


def select_step(steps: list[Step], cpu_lo: float, cpu_hi: float, want: str | None, file: str) -> Step:
    """`want`: None (the last step, or the whole trace when it has no markers), 'ProfilerStep#N',
    'N' (the step named ProfilerStep#N, else the N-th step counting from 0; negative from the end)."""
    if not steps:
        if want is not None:
            raise InputError("the trace has no ProfilerStep# markers, so --step cannot pick one", file=file,
                             value=want, expected="no --step (the whole trace is used)")
        if cpu_lo == float("inf"):
            raise InputError("the trace has no CPU ops (no 'cpu_op', 'operator' or 'user_annotation' event)", file=file,
                             expected="a PyTorch profiler trace recorded with ProfilerActivity.CPU")
        return Step("whole trace", cpu_lo, cpu_hi, -1)
    if want is None:
        return steps[-1]
    names = {s.name: s for s in steps}
    key = want if want.startswith("ProfilerStep#") else f"ProfilerStep#{want}"
    if key in names:
        return names[key]
    try:
        k = int(want)
    except ValueError:
        k = None
    if k is not None and -len(steps) <= k < len(steps):
        return steps[k]
    raise InputError("no such step", file=file, path="--step", value=want,
                     expected="one of: " + ", ".join(s.name for s in steps) + f" (or an index 0..{len(steps) - 1})")


def _no_gpu_work(file: str, chosen: Step, steps: list[Step], rt_ts: array, rt_corr: array, gpu_corr: array,
                 path: Path, by_default: bool) -> InputError:
    """Why the chosen step has nothing to replay: no GPU activity in the whole trace (CPU-only, or a
    device whose events the importer does not read), or GPU work only in other steps."""
    if not gpu_corr:
        cats: Counter[str] = Counter()
        for ev in iter_events(path):
            cat = _cat(ev)
            if ev.get("ph") == "X" and cat not in CPU_CATS | RUNTIME_CATS | IGNORED_CATS | {SYNC_CAT}:
                cats[cat] += 1
        other = ", ".join(f"{c} ({n})" for c, n in cats.most_common(4))
        return InputError("the trace has no GPU activity (no 'kernel', 'gpu_memcpy' or 'gpu_memset' event linked "
                          "by args.correlation)" + (f"; categories not read: {other}" if other else ""), file=file,
                          expected="a trace recorded with ProfilerActivity.CUDA on an NVIDIA or AMD GPU")
    launching = set(gpu_corr)
    starts = [s.ts for s in steps]
    busy: set[int] = set()
    for t, c in zip(rt_ts, rt_corr, strict=True):
        k = bisect.bisect_right(starts, t) - 1
        if k >= 0 and t <= steps[k].end and c in launching:
            busy.add(k)
    names = [steps[k].name for k in sorted(busy)]
    hint = ("--step with one that does: " + ", ".join(names[-5:])) if names else "a step with kernels, memcpys or memsets"
    which = " (the last step, the default)" if by_default and len(steps) > 1 else ""
    return InputError(f"step {chosen.name!r}{which} launches no GPU work", file=file, expected=hint)


def read_step(path: Path, step: str | None = None) -> StepEvents:
    """Both passes: the chosen step's events, linked and checked."""
    return _read_chosen(path, _scan(path), step)


def read_steps(path: Path, steps: list[str]) -> list[StepEvents | InputError]:
    """Several steps of one trace with one first pass (pass 2 reads the file once per step): each
    step's events as `read_step` gives them, or the input error `read_step` would raise for it."""
    found, cpu_lo, cpu_hi, rt_ts, rt_corr, gpu_corr, meta = _scan(path)
    out: list[StepEvents | InputError] = []
    for name in steps:
        try:  # each step gets its own copies of what the scan shares (no caller sees another's edits)
            out.append(_read_chosen(path, (list(found), cpu_lo, cpu_hi, rt_ts, rt_corr, gpu_corr, dict(meta)), name))
        except InputError as e:
            out.append(e)
    return out


def _read_chosen(path: Path, scan: tuple[list[Step], float, float, array, array, array, dict[str, Any]],
                 step: str | None) -> StepEvents:
    file = str(path)
    steps, cpu_lo, cpu_hi, rt_ts, rt_corr, gpu_corr, meta = scan
    chosen = select_step(steps, cpu_lo, cpu_hi, step, file)
    t0, t1 = chosen.ts, chosen.end
    in_step = {c for t, c in zip(rt_ts, rt_corr, strict=True) if t0 <= t <= t1}
    all_corr = sorted(set(rt_corr))

    cpu_ops: list[CpuOp] = []
    runtime: list[RuntimeCall] = []
    gpu: list[GpuActivity] = []
    syncs: list[SyncRecord] = []
    unknown: Counter[str] = Counter()
    prior_busy: dict[int, float] = {}
    python_ts: list[float] = []
    for i, ev in enumerate(iter_events(path)):
        ph = ev.get("ph")
        if ph != "X":
            continue
        cat = _cat(ev)
        if cat in CPU_CATS:
            ts = _num(file, i, ev, "ts")
            if ts < t0 or ts > t1 or _STEP_RX.match(str(ev.get("name", ""))):
                continue
            name = ev.get("name")
            if not isinstance(name, str):
                raise _bad(file, i, ev, "missing field 'name'", expected="the op's name")
            args = _args(file, i, ev)
            cpu_ops.append(CpuOp(i, name, ts, ts + _num(file, i, ev, "dur"), _tid(ev),
                                 _list_arg(file, i, ev, args, "Input Dims"), _list_arg(file, i, ev, args, "Input type"),
                                 _list_arg(file, i, ev, args, "Concrete Inputs"),
                                 {k: v for k, v in args.items() if k not in ("Input Dims", "Input type",
                                                                             "Concrete Inputs", "Input Strides")},
                                 annotation=cat == "user_annotation",
                                 input_strides=_list_arg(file, i, ev, args, "Input Strides")))
        elif cat in RUNTIME_CATS:
            ts = _num(file, i, ev, "ts")
            if ts < t0 or ts > t1:
                continue
            name = ev.get("name")
            if not isinstance(name, str):
                raise _bad(file, i, ev, "missing field 'name'", expected="the runtime call's name")
            corr = _arg_int(file, i, ev, "correlation", required=name in LAUNCH_CALLS)
            if corr is None:
                continue
            runtime.append(RuntimeCall(i, name, ts, ts + _num(file, i, ev, "dur"), _tid(ev), corr))
        elif cat in GPU_CATS:
            corr = _arg_int(file, i, ev, "correlation", required=True)
            assert corr is not None
            ts, dur = _num(file, i, ev, "ts"), _num(file, i, ev, "dur")
            stream = _arg_int(file, i, ev, "stream", required=True, minimum=0)
            assert stream is not None
            if corr not in in_step:
                # Earlier steps' work that is still running when this step starts delays it.
                if ts <= t1 and ts + dur >= t0:
                    j = bisect.bisect_left(all_corr, corr)
                    if not (j < len(all_corr) and all_corr[j] == corr):
                        raise _bad(file, i, ev, "GPU activity with no launch: no runtime call has its correlation id",
                                   value=corr, expected="a cudaLaunchKernel/cuLaunchKernel/cudaMemcpyAsync/... "
                                   "event with the same args.correlation")
                    # Launched before the step (it starts before the step ends), whether it was already
                    # running at the step's start or still queued behind a GPU that lags the host.
                    prior_busy[stream] = max(prior_busy.get(stream, t0), ts + dur)
                continue
            if dur < 0:
                raise _bad(file, i, ev, "negative duration", value=dur)
            name = ev.get("name")
            if not isinstance(name, str):
                raise _bad(file, i, ev, "missing field 'name'", expected="the kernel's name")
            nbytes = _args(file, i, ev).get("bytes")
            gpu.append(GpuActivity(
                i, name, "gpu_memcpy" if cat == "memcpy" else "gpu_memset" if cat == "memset" else cat,
                ts, ts + dur, stream, corr,
                grid=_dim3(file, i, ev, "grid"), block=_dim3(file, i, ev, "block"),
                regs=_arg_int(file, i, ev, "registers per thread", required=False),
                smem=_arg_int(file, i, ev, "shared memory", required=False),
                bytes=float(nbytes) if isinstance(nbytes, int | float) and 0 <= nbytes <= MAX_TRACE_NUMBER else None,
            ))
        elif cat == SYNC_CAT:
            corr = _arg_int(file, i, ev, "correlation", required=False) or 0
            if corr not in in_step:
                continue
            args = _args(file, i, ev)
            ts = _num(file, i, ev, "ts")
            stream, wait_stream, wait_corr = (
                _arg_int(file, i, ev, key, required=False)
                for key in ("stream", "wait_on_stream", "wait_on_cuda_event_record_corr_id"))
            syncs.append(SyncRecord(i, str(args.get("cuda_sync_kind", ev.get("name", "")))[:200], ts,
                                    ts + _num(file, i, ev, "dur"), -1 if stream is None else stream, corr,
                                    -1 if wait_stream is None else wait_stream, -1 if wait_corr is None else wait_corr))
        elif cat == "python_function":
            py_ts = ev.get("ts")
            if isinstance(py_ts, int | float) and not isinstance(py_ts, bool) and t0 <= py_ts <= t1:
                python_ts.append(float(py_ts))
        elif cat not in IGNORED_CATS:
            unknown[cat] += 1

    by_corr = {r.correlation: r for r in runtime}
    launches: dict[int, list[GpuActivity]] = {}
    for g in gpu:
        r = by_corr.get(g.correlation)
        if r is None:  # in_step said a runtime call with this id lies in the step; its event is malformed
            raise InputError("GPU activity's launch was not found in the step", file=file,
                             path=f"traceEvents[{g.index}] ({g.name!r})", value=g.correlation)
        if g.ts < r.ts - CLOCK_SLACK_US:
            raise InputError(
                f"events out of order: the GPU activity starts {r.ts - g.ts:.1f} us before its launch "
                f"traceEvents[{r.index}] ({r.name!r})", file=file, path=f"traceEvents[{g.index}] ({g.name!r})",
                expected="a kernel that starts after the runtime call that launched it")
        launches.setdefault(g.correlation, []).append(g)
    if not gpu:
        raise _no_gpu_work(file, chosen, steps, rt_ts, rt_corr, gpu_corr, path, step is None)
    cpu_ops.sort(key=lambda o: (o.ts, -o.end, o.index))
    runtime.sort(key=lambda r: (r.ts, r.index))
    gpu.sort(key=lambda g: (g.ts, g.index))
    for acts in launches.values():
        acts.sort(key=lambda g: (g.ts, g.index))
    return StepEvents(file=file, step=chosen, steps=steps, cpu_ops=cpu_ops, runtime=runtime, gpu=gpu,
                      syncs=syncs, launches=launches, unknown_categories=unknown, meta=meta,
                      prior_busy={s: e for s, e in prior_busy.items() if e > t0}, python_ts=sorted(python_ts))
