"""Fit the profile's host table by framework op (`host.framework_ops`) from Kineto traces of real
models (calibration/<gpu>/host_context/, recorded by sim.calibrate.gpu.host_context). CPU only.

For every top-level CPU op of a traced step (an op no other op of its thread encloses; annotations
that enclose launches, like the ProfilerStep range or Optimizer.step, are transparent) its
in-context host time is

    its duration - profiler_event_us x (events the profiler recorded inside it, itself included)
    + the host gap before it when shorter than GAP_CAP_US (the Python between two ops: the
      model's code, nn.Module calls)

and the table holds, per op name (sim.costmodel.host.op_key: `aten::addmm`, `MmBackward0`), the
median over all its calls: `grad_us` over calls in a training step's forward (autograd records a
node), `us` over the others (no_grad, inference_mode, backward nodes, the optimizer). Longer gaps
(data loading, the loss's Python, waits) stay `host` ops of a replayed trace and are no op's.
Where the profiler's own cost lands (inside an op's interval or just outside it) does not matter:
the op and the gap before it are counted together.

Compiled regions and CUDA-graph launches are left out: their cost depends on the graph they run
(the profile's compiled_call/graph_launch terms price them). Which configs fit and which validate
is fixed here (FIT_MODELS), by model, never by record.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sim.costmodel.host import AUTOGRAD_NODE_PREFIX, GAP_CAP_US, op_key

# The host_context configs a fit may use: eager steps of the GPT model (training at four token
# counts and inference). Everything else there (llama, mlp, the decode step, compiled steps,
# CUDA graphs) validates.
FIT_MODELS = frozenset({"gpt"})
FIT_MODES = frozenset({"eager"})  # the framework-op table's traces
# The host model's fits as a whole: the table (eager GPT steps) and the compiled calls in context (the GPT
# model's compiled steps, fit_compiled_calls): those configs' --host model rows are "calibrated".
HOST_MODEL_FIT_MODES = frozenset({"eager", "compiled"})
# The profiler's in-context cost (host.trace_profiler) is fitted on the same GPT model, its eager
# steps (cost per event) and its compiled forward (cost per torch.compile kernel record): the trace
# rows of those configs are "calibrated", every other model's validate.
TRACE_FIT_MODES = frozenset({"eager", "compiled"})
# Reference ops of the trace clock: called in every eager or compiled step, the same host path
# whatever the model (an allocation; a kernel launch under CUPTI's callback).
CLOCK_OPS = ("aten::empty", "cudaLaunchKernel")
# The compiled-training and loss-op benches (calibration-split models only), beside host_context/
COMPILED_TRAIN_DIR = "host_compiled_train"
SKIP_PREFIXES = ("ProfilerStep#", "Torch-Compiled Region", "CompiledFunction", "cudaGraphLaunch")
# A foreach op's cost per tensor (fit_foreach_bench) is written into the profile: priced per tensor, the
# unseen models' eager training steps improve (--host model A-C median 24.9 -> 10.1 %), which had hidden a
# compiled-training shortfall of about the same size (the optimizer's flat overcharge, ~700 us at 16 tensors):
# the compiled calls are now priced in context (compiled_call_values) and the loss ops the GPT traces lack
# come from their bench (fit_loss_ops), so both are on (docs/host.md, "The optimizer per tensor").
FOREACH_PER_TENSOR = True
# Which profiler cost the table's fit takes off each op. False (shipped): the tight-loop cost per event
# (host.profiler_event_us, ~2.25 us with record_shapes) on the trace's own durations. True: the in-context
# cost per event (host.trace_profiler.event_us, ~3.45 us at the reference host speed: what trace predict
# takes off) with every sample brought to the reference host speed (its in-context time / the trace's
# speed, sim.costmodel.trace_host.trace_host_speed), so that a fit step's table sum is its unprofiled
# time. Measured (--host model, A-C held-out median/max): eager training 15.6/43.3 -> 4.2/27.8 %, machine F
# 19.1/36.9 -> 7.4/21.5 %, eager inference 13.7/28.2 -> 9.3/25.2 %, compile gain 13.6 -> 6.9 pp, CUDA-graph
# gain 1.8 -> 0.9 pp; but eager decode 10.8/50.5 -> 17.5/61.6 % (its measurements are bimodal, 1.34-1.45
# vs 1.8-2.3 ms for one step, and the reference speed sits on the slow mode's far side), machine F decode
# 2.7/10.5 -> 6.1/19.0 % and compiled training max 8.3 -> 10.7 %: three tripwires, so it stays off
# (docs/host.md, "The profiler's cost in the table").
TABLE_IN_CONTEXT_PROFILER = False


# The tight loop's ops (calibration raw host_costs.json, bench eager_op: sim.calibrate.gpu.host_costs, tiny tensors,
# back-to-back calls) by the framework op each calls at the top level: where the table (real models' steps) has the
# same op, in-context / tight-loop is the ratio a framework op the table lacks is priced at
# (host.missing_framework_ops, fit_in_context_ratio).
TIGHT_LOOP_FRAMEWORK_OPS = {"mm": "aten::matmul", "addmm_linear": "aten::linear", "add_broadcast": "aten::add",
                            "gelu": "aten::gelu", "native_dropout": "aten::native_dropout", "sum_dim0": "aten::sum",
                            "layer_norm": "aten::layer_norm", "softmax": "aten::softmax", "t": "aten::t",
                            "view": "aten::view", "transpose": "aten::transpose", "index_copy_": "aten::index_copy_",
                            "sdpa": "aten::scaled_dot_product_attention"}
# Whether the shipped fit applies that ratio (host.missing_framework_ops.apply). Decode calls ops the GPT traces
# lack (per step 8x aten::index_copy_, 8x aten::slice, 1x aten::unsqueeze: +224 us at the reference speed, +11 %),
# llama many more (per 1x128 forward 49 launching calls of aten::mul, neg, cat, silu, rms_norm and 23 of
# aten::slice, chunk). Measured with it on (ratio 4.16; validate's host rows, shipped profile otherwise; median /
# max |error|, off -> on): --host model at each step's own speed, decode machine Y 2.0 / 5.1 -> 12.2 / 13.5 %,
# L 9.2 / 16.9 -> 2.8 / 7.7 %, M 15.0 / 26.4 -> 13.5 / 22.2 %; eager inference Y 2.5 / 3.2 -> 32.4 / 39.2 %, L 15.0 /
# 48.2 -> 18.0 / 25.9 %, M 17.2 / 25.8 -> 6.6 / 16.3 %; at the reference speed decode A-C 10.8 / 50.5 -> 21.6 / 67.3 %,
# F 2.7 / 10.5 -> 9.7 / 22.6 %, Y 3.0 / 5.2 -> 12.5 / 16.7 %; eager inference A-C 13.7 / 28.2 -> 20.8 / 36.2 %;
# compile gain Y 19.8 -> 34.4 pp, M 39.7 -> 57.5 pp; CUDA-graph gain A-C 1.8 -> 0.7 pp. Nineteen groups cross their
# tripwires (eleven gated before v19, the own-speed decode and eager inference groups among them), so it stays off. What the rows say: the steps
# measured at the slow host level (Y's decode, at the level the reference clock was set) are right without the
# ratio and 10-13 % long with it; those at the fast level (L's and M's decode) are short without it, and the
# ratio closes that as a sub-linear clock-to-speed relation would (docs/host.md, "Framework ops the table lacks").
# Llama's functional ops (rotary embedding, RMSNorm's pieces) do not pay the GPT table's module-call context:
# a per-op constant ratio over-prices them.
PRICE_MISSING_IN_CONTEXT = False


@dataclass(frozen=True)
class InContextRatio:
    """host.missing_framework_ops.ratio: the median over the ops the table and the tight loop share of the
    table's in-context cost (no autograd recording) over the tight loop's (median over its runs)."""

    value: float
    spread: tuple[float, float] | None
    per_op: dict[str, tuple[float, float]]  # framework op -> (in-context us, tight-loop us)


def fit_in_context_ratio(table: dict[str, dict[str, float]], tight_loop_us: dict[str, list[float]]) -> InContextRatio | None:
    """The in-context / tight-loop ratio from the fitted table (`us` per framework op) and the tight loop's
    host times per call (bench op -> one per run; TIGHT_LOOP_FRAMEWORK_OPS names their framework ops): the median
    over shared ops, its spread the 90 % bootstrap interval of that median (ops resampled). None without a
    shared op."""
    from sim.calibrate.fit import _median_interval

    per_op: dict[str, tuple[float, float]] = {}
    for bench, runs in sorted(tight_loop_us.items()):
        name = TIGHT_LOOP_FRAMEWORK_OPS.get(bench)
        entry = table.get(name or "")
        if name is None or entry is None or entry.get("us") is None or not runs:
            continue
        per_op[name] = (float(entry["us"]), statistics.median(runs))
    if not per_op:
        return None
    ratios = [ctx / tight for ctx, tight in per_op.values()]
    value = round(statistics.median(ratios), 3)
    return InContextRatio(value, _median_interval(ratios, value), per_op)


def in_context_ratio_values(raw: Any, table: dict[str, dict[str, float]], apply: bool = PRICE_MISSING_IN_CONTEXT) -> list[Any]:
    """host.missing_framework_ops as a fitted value (fit_in_context_ratio on `raw`'s host_costs tight loop);
    none without shared ops."""
    from sim.calibrate.fit import Fitted

    tight: dict[str, list[float]] = {}
    for r in raw.records("host_costs", "eager_op"):
        tight.setdefault(str(r["op"]), []).append(float(r["host_us_per_op"]))
    fit = fit_in_context_ratio(table, tight)
    if fit is None:
        return []
    ops = ", ".join(f"{name} {ctx:g}/{t:.2f}" for name, (ctx, t) in sorted(fit.per_op.items(), key=lambda kv: kv[1][0] / kv[1][1]))
    text = ("median over the framework ops the in-context table (host.framework_ops, us) and the tight loop "
            f"(host_costs.json eager_op, median over runs) share of in-context / tight-loop host time per call: {ops} us; "
            "spread: bootstrap of the median, ops resampled")
    return [Fitted("host", "missing_framework_ops", {"ratio": fit.value, "apply": apply}, "host_costs.json", text,
                   n=len(fit.per_op), spread=fit.spread)]


@dataclass
class OpSamples:
    plain: list[float] = field(default_factory=list)
    grad: list[float] = field(default_factory=list)
    tensors: list[int] = field(default_factory=list)  # a foreach op's list length per call, where known


@dataclass(frozen=True)
class ForeachBench:
    """A foreach optimizer step's host time against its parameter tensors, fitted by least squares on the
    AdamW (foreach) bench of the host_context machines: fixed_us + per_tensor_us x tensors."""

    fixed_us: float
    per_tensor_us: float
    n: int  # bench records fitted

    def per_tensor_us_of(self, cost_us: float, tensors: int) -> float:
        """The per-tensor part of a foreach op that costs `cost_us` per call over `tensors` tensors, split
        as the bench's whole step over that many tensors splits (fixed : per tensor)."""
        return round(cost_us * self.per_tensor_us / (self.fixed_us + self.per_tensor_us * tensors), 3)


def fit_foreach_bench(host_context: Path) -> ForeachBench | None:
    """The foreach AdamW bench (`optimizer_step`, impl foreach; 4 to 256 tensors of 64x1024) of every
    machine under `host_context`, pooled: ordinary least squares of host time per step on tensors. None
    with fewer than two tensor counts."""
    from sim.validate.host import machine_folders

    xs: list[float] = []
    ys: list[float] = []
    for _, sub in machine_folders(host_context):
        for rec in json.loads((sub / "host_context.json").read_text()).get("records", []):
            if rec.get("bench") == "optimizer_step" and rec.get("impl") == "foreach" and rec.get("host_us_per_step"):
                xs.append(float(rec["params"]))
                ys.append(float(rec["host_us_per_step"]))
    if len(set(xs)) < 2:
        return None
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)
    return ForeachBench(round(my - slope * mx, 2), round(slope, 3), len(xs))


def _in_optimizer(o: Any, ranges: list[tuple[float, float]]) -> bool:
    return any(a <= o.ts <= b for a, b in ranges)


# path -> per top-level op: (table key, duration us, events inside, gap before us, in a training forward, config,
# a foreach op's tensors per list or 0)
_RECORDS: dict[str, list[tuple[str, float, int, float, bool, str, int]]] = {}


def _step_events(path: Path, imported: list[Any] | None) -> list[tuple[Any, bool]]:
    """(events, whether it trains) of every step of the trace, in file order: from `imported` (the trace's
    imported steps, sim.validate.host.traced_steps) where those are every step of the trace, else read here."""
    from sim.ingest import import_trace
    from sim.ingest.kineto import read_step

    if imported:
        names = [st.name for st in imported[0].events.steps]
        by_name = {st.events.step.name: st for st in imported}
        if len(by_name) == len(imported) and set(by_name) == set(names):
            return [(by_name[name].events, by_name[name].training) for name in names]
    first = read_step(path, None)
    return [(first if st.name == first.step.name else read_step(path, st.name), import_trace(path, st.name).training)
            for st in first.steps]


def _trace_records(path: Path, imported: list[Any] | None = None) -> list[tuple[str, float, int, float, bool, str, int]]:
    """The top-level CPU ops of every step of the trace, read once per process (a refit with other
    per-event costs, as the bootstrap does, needs only arithmetic); `imported`: the trace's steps already
    imported (sim.validate.host.traced_steps), used instead of reading the file again where they are all of them."""
    from sim.costmodel.trace_host import FOREACH_PREFIX, foreach_tensors
    from sim.ingest.build import _Counts

    key = str(path.resolve())
    if key in _RECORDS:
        return _RECORDS[key]
    out = []
    for ev, training in _step_events(path, imported):
        cfg = "stack" if ev.python_ts else ("shapes" if ev.meta.get("record_shapes") else "plain")
        counts = _Counts(ev)
        opt = [(o.ts, o.end) for o in ev.cpu_ops if o.name.startswith("Optimizer.")]
        tensors = foreach_tensors(ev) or 0
        prev_end = float("-inf")
        for o in counts.tops:
            gap = o.ts - prev_end
            prev_end = max(prev_end, o.end)
            if op_key(o.name).startswith(SKIP_PREFIXES):
                continue
            node = o.name.startswith(AUTOGRAD_NODE_PREFIX)
            grad = training and not node and not _in_optimizer(o, opt) and not o.name.startswith("Optimizer.")
            out.append((op_key(o.name), o.end - o.ts, counts.events(o.ts - 1e-6, o.end), gap, grad, cfg,
                        tensors if o.name.startswith(FOREACH_PREFIX) else 0))
    _RECORDS[key] = out
    return out


def trace_op_samples(path: Path, per_event_us: dict[str, float], samples: dict[str, OpSamples] | None = None,
                     speed: float = 1.0, imported: list[Any] | None = None) -> dict[str, OpSamples]:
    """Add the in-context host time of every top-level CPU op of every step of the trace at `path`, at
    the reference host speed when the trace ran at `speed` (its durations / speed; `per_event_us` is then
    the profiler's cost at the reference speed too); `imported` as _trace_records takes it."""
    out = samples if samples is not None else {}
    for name, dur, inside, gap, grad, cfg, tensors in _trace_records(path, imported):
        host = dur / speed - per_event_us.get(cfg, 0.0) * inside + (gap if 0.0 <= gap < GAP_CAP_US else 0.0) / speed
        s = out.setdefault(name, OpSamples())
        (s.grad if grad else s.plain).append(max(0.0, host))
        if tensors:
            s.tensors.append(tensors)
    return out


def fit_table(traces: list[Path], per_event_us: dict[str, float], min_calls: int = 3,
              foreach: ForeachBench | None = None, clock_us: dict[str, float] | None = None,
              ) -> dict[str, dict[str, float]]:
    """Per op name: `us`, `grad_us` (medians, where there are at least `min_calls` calls) and `calls`;
    for a foreach op whose calls' list length is known, with the optimizer bench `foreach`: `tensors`
    (the median length) and `per_tensor_us`, the op's cost times the bench's per-tensor share at that
    length. NB: every foreach op of the step is assumed to split fixed and per-tensor cost as the whole
    bench step does (the bench times whole steps, not ops). With `clock_us` (host.trace_profiler.clock_us)
    each trace's samples are brought to that reference host speed (trace_op_samples)."""
    from sim.costmodel.trace_host import trace_host_speed

    samples: dict[str, OpSamples] = {}
    for p in traces:
        trace_op_samples(p, per_event_us, samples, trace_host_speed(_imported_step(p), clock_us) if clock_us else 1.0)
    table: dict[str, dict[str, float]] = {}
    for name in sorted(samples):
        s = samples[name]
        entry: dict[str, float] = {}
        if len(s.plain) >= min_calls:
            entry["us"] = round(statistics.median(s.plain), 2)
        if len(s.grad) >= min_calls:
            entry["grad_us"] = round(statistics.median(s.grad), 2)
        if not entry:
            continue
        entry["calls"] = float(len(s.plain) + len(s.grad))
        if foreach is not None and len(s.tensors) >= min_calls:
            tensors = int(statistics.median(s.tensors))
            entry["tensors"] = float(tensors)
            entry["per_tensor_us"] = foreach.per_tensor_us_of(entry.get("us", entry.get("grad_us", 0.0)), tensors)
        table[name] = entry
    return table


# Loss ops measured on their own (sim.calibrate.gpu.host_context part compiled_train, bench loss_op) against
# cross-entropy, the loss the fit traces price in context: op -> its backward node; the reference's nodes.
LOSS_NODES = {"aten::mse_loss": "MseLossBackward0"}
LOSS_REFERENCE = ("aten::cross_entropy_loss", ("NllLossBackward0", "LogSoftmaxBackward0"))


def _bench_records(folder: Path, bench: str) -> list[dict[str, Any]]:
    from sim.validate.host import machine_folders

    return [rec for _, sub in machine_folders(folder)
            for rec in json.loads((sub / "host_context.json").read_text()).get("records", []) if rec.get("bench") == bench]


def fit_loss_ops(folder: Path, table: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """Table entries for the loss ops the fit traces lack (LOSS_NODES), from the loss_op bench under `folder`
    (host per forward call with and without autograd recording, and per forward + .backward(), on 64 x 1024)
    and the table's in-context cross-entropy: a tight loop misses what a real step adds around the loss (the
    Python before it, cold caches), so each entry is its bench time plus that in-context surcharge as the
    reference shows it (table grad_us - bench forward with recording); the backward node is the bench's
    backward difference to the reference's (.backward(), the gradient seed and the input's AccumulateGrad
    cancel) plus the table's cost of the reference's nodes (both are a step's first backward nodes, where
    the engine starts). Medians over the bench's records; nothing when the reference is not in the table."""
    recs = _bench_records(folder, "loss_op")
    ref_op, ref_nodes = LOSS_REFERENCE
    ref = [r for r in recs if r.get("op") == ref_op]
    ref_grad = table.get(ref_op, {}).get("grad_us")
    node_us = [table.get(n, {}).get("us") for n in ref_nodes]
    if not ref or ref_grad is None or any(v is None for v in node_us):
        return {}
    surcharge = ref_grad - statistics.median(float(r["fwd_grad_us"]) for r in ref)
    ref_bwd = statistics.median(float(r["fwd_bwd_us"]) - float(r["fwd_grad_us"]) for r in ref)
    nodes = sum(v for v in node_us if v is not None)
    out: dict[str, dict[str, float]] = {}
    for op, node in LOSS_NODES.items():
        rs = [r for r in recs if r.get("op") == op]
        if not rs or op in table:
            continue
        out[op] = {"us": round(statistics.median(float(r["fwd_nograd_us"]) for r in rs) + surcharge, 2),
                   "grad_us": round(statistics.median(float(r["fwd_grad_us"]) for r in rs) + surcharge, 2),
                   "calls": float(len(rs))}
        bwd = statistics.median(float(r["fwd_bwd_us"]) - float(r["fwd_grad_us"]) for r in rs)
        out[node] = {"us": round(max(0.0, bwd - ref_bwd + nodes), 2), "calls": float(len(rs))}
    return out


def _loss_text(op: str) -> str:
    ref_op, ref_nodes = LOSS_REFERENCE
    if op in LOSS_NODES:
        return (f"loss_op bench (64 x 1024 bf16, host per call with / without autograd recording) plus the in-context "
                f"surcharge of {ref_op} (its table grad_us - its bench time with recording)")
    return (f"loss_op bench: its forward + .backward() less the forward, less the same for {ref_op}, plus the "
            f"table's {' + '.join(ref_nodes)}")


@dataclass(frozen=True)
class CompiledTrainingFit:
    """host.compiled_training from the compiled_params bench: an nn.Module of P parameters compiled, its forward
    timed with and without autograd recording; the difference against the tensors the compiled function takes
    (P + the input), least squares."""

    grad_call_us: float
    grad_input_us: float
    n: int


def fit_compiled_training(folder: Path) -> CompiledTrainingFit | None:
    recs = [r for r in _bench_records(folder, "compiled_params") if r.get("fwd_grad_us") and r.get("fwd_nograd_us")]
    xs = [float(r["params"]) + 1.0 for r in recs]
    if len(set(xs)) < 2:
        return None
    ys = [float(r["fwd_grad_us"]) - float(r["fwd_nograd_us"]) for r in recs]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    slope = max(0.0, sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs))
    return CompiledTrainingFit(round(max(0.0, my - slope * mx), 2), round(slope, 3), len(recs))


def compiled_training_values(folder: Path, values: list[Any]) -> list[Any]:
    """host.compiled_training from the compiled_params bench. NB: compiled_backward_call_us (sim.calibrate.fit,
    a compiled chain's training step less its forward timed without autograd) still holds the forward's
    autograd cost; the workloads that say their compiled regions' `tensors` pay both."""
    from sim.calibrate.fit import Fitted

    fit = fit_compiled_training(folder)
    if fit is None:
        return []
    raw = f"../{folder.name}"
    what = ("least squares over the compiled_params bench (an nn.Module of P = 1, 8, 32 parameters compiled, its "
            "forward's host time with autograd recording less without) against the tensors the compiled function "
            "takes (P + 1)")
    out = [Fitted("host.compiled_training", "grad_call_us", fit.grad_call_us, raw, f"intercept of the {what}", n=fit.n),
           Fitted("host.compiled_training", "grad_input_us", fit.grad_input_us, raw, f"slope of the {what}", n=fit.n),
           Fitted("host.compiled_training", "backward_input_us", 0.0, raw,
                  "not separated: the bench's backward host time grows 33 us per parameter, but each parameter's "
                  "gradient there aliases one buffer, which AccumulateGrad clones (a kernel) - priced per node and "
                  "kernel already", n=fit.n)]
    return out


@dataclass(frozen=True)
class RegionOverhead:
    """One compiled region of a traced step: its host time outside the kernels it launches (from the region's
    start to its first launching op, and from its last launching op's end to the region's end), less the
    profiler's cost for the events recorded there (us)."""

    kind: str  # "forward" (a Torch-Compiled Region) or "backward" (a CompiledFunctionBackward call)
    grad: bool  # a forward called with autograd recording (AOTAutograd's CompiledFunction inside it)
    inputs: int  # the tensors that CompiledFunction takes (0 without it)
    us: float


def region_overheads(step: Any, event_us: float) -> list[RegionOverhead]:
    """The compiled regions of an imported traced step (see RegionOverhead); `event_us`: the profiler's
    cost per event. NB: not scaled by the trace's host speed: a compiled step calls too few of the clock's
    reference ops for a stable estimate (0.57 to 1.37 between steps of one trace)."""
    import bisect

    from sim.ingest.build import COMPILED_FUNCTION, COMPILED_REGION_PREFIX

    ev = step.events
    times = sorted([o.ts for o in ev.cpu_ops] + [r.ts for r in ev.runtime])
    launch_ts = sorted(r.ts for r in ev.runtime if r.correlation in ev.launches)
    out = []
    for reg in ev.cpu_ops:
        kind = ("forward" if reg.name.startswith(COMPILED_REGION_PREFIX)
                else "backward" if reg.name == "CompiledFunctionBackward" else "")
        if not kind:
            continue
        inside = [o for o in ev.cpu_ops if reg.ts < o.ts <= reg.end]
        launching = [o for o in inside if o.name.startswith(("aten::", "triton"))
                     and bisect.bisect_right(launch_ts, o.end) > bisect.bisect_left(launch_ts, o.ts)]
        if not launching:
            continue
        first, last = min(o.ts for o in launching), max(o.end for o in launching)
        events = (bisect.bisect_left(times, first) - bisect.bisect_left(times, reg.ts)
                  + bisect.bisect_right(times, reg.end) - bisect.bisect_right(times, last))
        raw = (first - reg.ts) + (reg.end - last)
        fn = next((o for o in inside if o.name == COMPILED_FUNCTION), None)
        out.append(RegionOverhead(kind, fn is not None, len(fn.input_dims or []) if fn is not None else 0,
                                  raw - event_us * events))
    return out


@dataclass(frozen=True)
class CompiledCallFit:
    """The compiled calls in context, from the compiled steps of the fit model's traces: medians over
    regions of RegionOverhead (per config first, then over configs, so no config weighs by its steps)."""

    call_us: float  # forward without autograd recording
    grad_call_us: float | None  # with it, beyond call_us and grad_input_us x inputs
    backward_call_us: float | None
    n_call: int
    n_grad: int
    n_backward: int


def fit_compiled_calls(folders: list[Path], event_us: float, grad_input_us: float) -> CompiledCallFit | None:
    """Compiled calls in context (CompiledCallFit) from the trace-fit compiled steps of the fit models under
    `folders` (host_context and the compiled-training folder); None without a compiled forward no_grad."""
    from sim.validate.host import host_cases, traced_steps

    by: dict[str, dict[str, list[float]]] = {"call": {}, "grad": {}, "backward": {}}
    for folder in folders:
        for c in host_cases(folder):
            if c.trace_split != "fit" or c.record.get("mode") != "compiled":
                continue
            for st in traced_steps(c.trace):
                for r in region_overheads(st, event_us):
                    key = "backward" if r.kind == "backward" else ("grad" if r.grad else "call")
                    by[key].setdefault(c.config, []).append(r.us - (grad_input_us * r.inputs if r.grad else 0.0))
    meds = {k: [statistics.median(v) for v in cfgs.values()] for k, cfgs in by.items()}
    if not meds["call"]:
        return None
    call = statistics.median(meds["call"])
    grad = statistics.median(meds["grad"]) - call if meds["grad"] else None
    bwd = statistics.median(meds["backward"]) if meds["backward"] else None
    return CompiledCallFit(round(call, 2), None if grad is None else round(max(0.0, grad), 2),
                           None if bwd is None else round(bwd, 2),
                           *(sum(len(v) for v in by[k].values()) for k in ("call", "grad", "backward")))


# The kernels a compiled forward launches, in context (issue 15). --host model priced each at the tight-loop cost of
# an empty Triton launch (triton_launch_us, 14.8 us) or, for an extern kernel (addmm, SDPA), compiled_kernel_us plus
# the op's tight-loop eager dispatch (30.8 / 48 us): about 24 us per launch in the GPT forward. In the fit traces the
# span of a compiled no-grad forward from its first launching op to its last, less the profiler's cost of the
# events and torch.compile kernel records there, at the reference speed (over the trace's host speed), is 34-47 us
# per launch (the wrapper's Python between launches: buffer allocation, reinterpret_tensor, the launcher's argument
# handling) - as the eager ops' in-context costs are 2-5x their tight loop's. The compiled GPT forward's host came
# out ~35 % short at its own trace speed and the compile gain ~20 pp too large (calibration runs Y, K, L, calib7,
# M: measured 1570-1820 us at the reference speed, priced 1157 us). Fitted 37.54 us (9 regions, 3 configs).
# Applied where COMPILED_KERNEL_IN_CONTEXT. Measured with it on (validate, h200-measured otherwise shipped; median /
# max |error| off -> on): --host model at each held-out step's own speed, compiled inference L 25.7 / 28.0 -> 2.3 /
# 8.4 %, N 28.4 / 31.6 -> 4.4 / 33.4 %, but Y (unseen) 6.2 / 17.0 -> 45.4 / 47.9 % and M 12.2 / 40.4 -> 23.8 / 34.4 %;
# at the reference speed compiled inference A-C (calibrated) 25.4 / 29.0 -> 7.0 / 62.4 %, Y 34.7 / 39.6 -> 92.2 /
# 105.4 %, L 20.2 / 22.0 -> 32.8 / 71.4 %, M 27.8 / 46.1 -> 29.8 / 111.1 %, N 30.6 / 75.9 -> 11.5 / 147.7 %;
# compile gain (--host model, held-out machines) 29.4 -> 17.6 pp median over the 14 pairs, but L 35.1 -> 47.0 pp and
# N 44.1 -> 52.3 pp; compiled training unchanged (its regions record autograd). The slow-level compiled steps (L, N)
# come right at their own speed, the fast-level ones (Y's, M's, whose clocks also switched level around the timing)
# come out long: 17 tripwires, so it stays off.
# Together with host.clock_level applied (issue 15, host10; exponent 0.722, reference 7.802 us, the fit before machine
# P's steps joined; kernel_us 37.54 us; validate's host groups, h200-measured otherwise shipped; median / max |error|
# off -> on): own-speed compiled inference L 25.7 / 28.0 -> 2.2 / 4.2 %, N 28.4 / 31.6 -> 13.3 / 41.0 %, but Y
# (unseen) 6.2 / 17.0 -> 32.7 / 43.9 %, M 12.2 / 40.4 -> 20.4 / 28.3 %, O 3.0 / 11.3 -> 23.4 / 38.0 %; own-speed decode
# Y 2.0 / 5.1 -> 9.9 / 14.9 %, N 13.5 / 24.6 -> 22.3 / 31.3 %, O 12.0 / 17.7 -> 23.4 / 28.9 %; own-speed compile gain
# (v22_host10) Y 9.0 -> 21.3 pp, L 16.8 -> 27.9, M 4.7 -> 30.5, N 17.5 -> 6.1, O 12.5 -> 34.8; reference-speed compiled
# inference Y 34.7 / 39.6 -> 92.2 / 105.4 %, O 15.8 / 19.7 -> 69.5 / 69.9 %. 34 tripwires cross (the new own-speed
# gain gates not counted), so both stay off. With the refit that machine J's steps joined (exponent 0.664, reference
# 8.134 us, the shipped clock_level): 38 cross, the own-speed gain gates of Y (19.5 pp), L (27.4), M (28.9) and O (35.1)
# among them (N 17.5 -> 1.6 pp); own-speed decode O 12.0 / 17.7 -> 24.9 / 30.5 %, compiled inference Y 6.2 -> 31.2 %.
COMPILED_KERNEL_IN_CONTEXT = False


def fit_compiled_kernel(folders: list[Path], event_us: float, record_us: float,
                        trace_clock_us: dict[str, float]) -> tuple[float, int, int] | None:
    """host.compiled_in_context.kernel_us: per compiled forward region without autograd recording in the trace-fit
    compiled steps under `folders`, (its first launching op's start to its last one's end / the trace's host speed
    - event_us x events - record_us x torch.compile kernel records recorded there) / the launches there; median per
    config, then over configs. (value, regions, configs); None without such a region."""
    import bisect

    from sim.costmodel.trace_host import trace_host_speed
    from sim.ingest.build import COMPILED_FUNCTION, COMPILED_REGION_PREFIX, KERNEL_RECORD_ARG
    from sim.validate.host import host_cases, traced_steps

    by: dict[str, list[float]] = {}
    for folder in folders:
        for c in host_cases(folder):
            if c.trace_split != "fit" or c.record.get("mode") != "compiled":
                continue
            steps = traced_steps(c.trace)
            speed = statistics.median(trace_host_speed(st, trace_clock_us) for st in steps) if trace_clock_us else 1.0
            for st in steps:
                ev = st.events
                times = sorted([o.ts for o in ev.cpu_ops] + [r.ts for r in ev.runtime])
                records = sorted(o.ts for o in ev.cpu_ops if KERNEL_RECORD_ARG in o.args)
                launch_ts = sorted(r.ts for r in ev.runtime if r.correlation in ev.launches)
                for reg in ev.cpu_ops:
                    if not reg.name.startswith(COMPILED_REGION_PREFIX):
                        continue
                    inside = [o for o in ev.cpu_ops if reg.ts < o.ts <= reg.end]
                    if any(o.name == COMPILED_FUNCTION for o in inside):
                        continue  # called with autograd recording
                    launching = [o for o in inside if o.name.startswith(("aten::", "triton"))
                                 and bisect.bisect_right(launch_ts, o.end) > bisect.bisect_left(launch_ts, o.ts)]
                    if not launching:
                        continue
                    first, last = min(o.ts for o in launching), max(o.end for o in launching)
                    launches = bisect.bisect_right(launch_ts, last) - bisect.bisect_left(launch_ts, first)
                    events = bisect.bisect_right(times, last) - bisect.bisect_right(times, first)
                    recs = bisect.bisect_right(records, last) - bisect.bisect_right(records, first)
                    by.setdefault(c.config, []).append(
                        ((last - first) / speed - event_us * events - record_us * recs) / launches)
    if not by:
        return None
    return (round(statistics.median(statistics.median(v) for v in by.values()), 2),
            sum(len(v) for v in by.values()), len(by))


def compiled_call_values(folders: list[Path], values: list[Any]) -> list[Any]:
    """host.compiled_in_context (fit_compiled_calls): a real step's compiled call costs 2-3x what a loop calling
    one small graph pays (compiled_call_us, compiled_training, compiled_backward_call_us: the prices of
    hand-written workloads), as its eager ops cost 2-4x theirs; a replayed trace's --host model uses these."""
    from sim.calibrate.fit import Fitted

    event = next((float(v.value) for v in values if v.section == "host.trace_profiler.event_us" and v.key == "shapes"),
                 None)
    grad_input = next((float(v.value) for v in values if v.section == "host.compiled_training" and v.key == "grad_input_us"),
                      0.0)
    if event is None:
        return []
    fit = fit_compiled_calls(folders, event, grad_input)
    if fit is None or fit.grad_call_us is None or fit.backward_call_us is None:
        return []
    what = ("host time of the compiled regions of the {} in the fit model's compiled steps outside the kernels they "
            "launch (region start to first launching op, last one's end to region end) less the profiler's "
            f"host.trace_profiler event_us ({event:g} us) per event recorded there; median per config, then over configs")
    sec = "host.compiled_in_context"
    return [Fitted(sec, "call_us", fit.call_us, "../host_context",
                   what.format("forwards without autograd (inference_mode)") + f" ({fit.n_call} regions)", n=fit.n_call),
            Fitted(sec, "grad_call_us", fit.grad_call_us, f"../{COMPILED_TRAIN_DIR}",
                   what.format("forwards with autograd recording (training)")
                   + f", less call_us and compiled_training.grad_input_us per input tensor ({fit.n_grad} regions)",
                   n=fit.n_grad),
            Fitted(sec, "backward_call_us", fit.backward_call_us, f"../{COMPILED_TRAIN_DIR}",
                   what.format("backward graphs (CompiledFunctionBackward)") + f" ({fit.n_backward} regions)",
                   n=fit.n_backward)] + compiled_kernel_values(folders, values)


def compiled_kernel_values(folders: list[Path], values: list[Any],
                           apply: bool = COMPILED_KERNEL_IN_CONTEXT) -> list[Any]:
    """host.compiled_in_context.kernel_us (fit_compiled_kernel) as a fitted value; none without the profiler's
    in-context costs or a compiled no-grad forward in the fit traces."""
    from sim.calibrate.fit import Fitted

    def first(section: str, key: str | None = None) -> Any:
        return next((v for v in values if v.section == section and (key is None or v.key == key)), None)

    event, record = first("host.trace_profiler.event_us", "shapes"), first("host.trace_profiler.kernel_record_us", "shapes")
    clock = {v.key: float(v.value) for v in values if v.section == "host.trace_profiler.clock_us"}
    if event is None or record is None:
        return []
    fit = fit_compiled_kernel(folders, float(event.value), float(record.value), clock)
    if fit is None:
        return []
    us, regions, configs = fit
    text = ("per compiled forward without autograd (inference_mode) in the fit model's compiled steps: (its first "
            "launching op's start to its last one's end / the trace's host speed against host.trace_profiler.clock_us "
            f"- host.trace_profiler event_us ({float(event.value):g} us) per event and kernel_record_us "
            f"({float(record.value):g} us) per torch.compile kernel record there) / the launches there; median per "
            f"config, then over configs ({regions} regions, {configs} configs)")
    return [Fitted("host.compiled_in_context", "kernel_us", {"value": us, "apply": apply}, "../host_context", text,
                   n=regions)]


def fit_traces(host_context: Path) -> tuple[list[Path], list[str], dict[str, Any]]:
    """The traces of the fit split under `host_context` (one host_context.json, or one subfolder per
    machine), their config labels and the first run's meta."""
    from sim.validate.host import host_cases, machine_folders

    cases = [c for c in host_cases(host_context) if c.split == "fit" and c.record.get("mode") in FIT_MODES]
    runs = machine_folders(host_context)
    meta = json.loads((runs[0][1] / "host_context.json").read_text()).get("meta", {}) if runs else {}
    return [c.trace for c in cases], [c.config for c in cases], meta


def _fit_text(configs: list[str]) -> str:
    return (f"median in-context host time per call in the traces of {', '.join(configs)} (duration less the "
            "profiler's per-event cost, plus the Python gap before it under 100 us)")


def _foreach_text(entry: dict[str, Any], foreach: ForeachBench | None) -> str:
    """What a foreach entry's fit text adds: where its per-tensor cost comes from."""
    if foreach is None or "tensors" not in entry:
        return ""
    return (f"; tensors: median AccumulateGrad nodes of those steps; per_tensor_us: us x the foreach AdamW bench's "
            f"per-tensor share at that count (bench {foreach.fixed_us:g} us + {foreach.per_tensor_us:g} us per tensor, "
            f"least squares over {foreach.n} steps of 4-256 tensors on the host_context machines)")


def _device(meta: dict[str, Any]) -> tuple[str, str]:
    smi = meta.get("nvidia_smi") or {}
    device = (f"{meta.get('gpu_name', 'GPU')} ({meta.get('sm_count', '?')} SMs, driver {smi.get('driver', '?')}, "
              f"torch {meta.get('torch', '?')}, triton {meta.get('triton', '?')})")
    return device, str(meta.get("date_utc", ""))[:10] or "unknown"


def fit_host_context(raw: Any, values: list[Any]) -> list[Any]:
    """The `host.framework_ops` entries fitted from the fit split of `<raw>/../host_context/`,
    with the profiler's per-event cost fitted so far (`values`); none when that folder is absent."""
    from sim.calibrate.fit import Fitted

    folder = Path(raw.root).parent / "host_context"
    per_event = {v.key: float(v.value) for v in values if v.section == "host.profiler_event_us"}
    if not per_event:
        return []
    traces, configs, meta = fit_traces(folder)
    if not traces:
        return []
    foreach = fit_foreach_bench(folder) if FOREACH_PER_TENSOR else None
    in_context = fit_trace_profiler(folder) if TABLE_IN_CONTEXT_PROFILER else None
    if in_context is not None:
        per_event = {in_context.config: in_context.event_us}
    table = fit_table(traces, per_event, foreach=foreach, clock_us=in_context.clock_us if in_context else None)
    fit = f"{_fit_text(configs)}; traces recorded {_device(meta)[1]} on the host_context machines"
    if in_context is not None:
        fit += ("; the profiler's in-context cost per event (host.trace_profiler.event_us), every call brought to "
                "the reference host speed (host.trace_profiler.clock_us)")
    out = [Fitted("host.framework_ops", name, {k: (int(v) if k in ("calls", "tensors") else v) for k, v in entry.items()},
                  "../host_context", fit + _foreach_text(entry, foreach)) for name, entry in table.items()]
    compiled = folder.parent / COMPILED_TRAIN_DIR
    if compiled.is_dir():
        out += [Fitted("host.framework_ops", name, {k: (int(v) if k == "calls" else v) for k, v in entry.items()},
                       f"../{COMPILED_TRAIN_DIR}", _loss_text(name)) for name, entry in fit_loss_ops(compiled, table).items()]
        out += compiled_training_values(compiled, values)
    out += in_context_ratio_values(raw, table)
    tp = trace_profiler_values(folder)
    clock = host_clock_values(folder.parent / CLOCK_RUNS, {v.key: float(v.value) for v in tp
                                                          if v.section == "host.trace_profiler.clock_us"})
    level = clock_level_values(folder.parent, {v.key: float(v.value) for v in tp
                                               if v.section == "host.trace_profiler.clock_us"})
    classes = missing_class_values(folder.parent, set(table), per_event,
                                   {v.key: float(v.value) for v in tp if v.section == "host.trace_profiler.clock_us"})
    table_level = table_level_values(folder.parent, table, per_event,
                                     {v.key: float(v.value) for v in tp if v.section == "host.trace_profiler.clock_us"})
    return (out + tp + clock + level + classes + table_level
            + compiled_call_values([folder] + ([compiled] if compiled.is_dir() else []), values + out + tp))


# The host clock at the reference host speed (host.clock_us). The table's prices hold at the speed of the GPT
# fit traces (host.trace_profiler.clock_us: their clock ops' median durations); those traces carry no host clock
# (recorded before wave 8), so the bridge is the calibration runs' own host steps (CLOCK_RUNS/*/CLOCK_RUN_PARTS,
# sim.calibrate.gpu.host_context --parts steps), recorded since wave 8 with a clock: each eager step of a fit
# model (the same configs as the table's traces, so the clock ops' cost in the workload cancels) gives its clock
# just before its trace over that trace's host speed. One number per step; the median over every run's steps.
CLOCK_RUNS = "runs"
CLOCK_RUN_PARTS = ("host_cold", "host_warm")


@dataclass(frozen=True)
class HostClockFit:
    """host.clock_us: the median over the runs' clocked fit-model steps, its 90 % bootstrap interval (steps
    resampled within each run) and the per-run medians (run -> (median us, steps))."""

    value: float
    spread: tuple[float, float] | None
    n: int
    per_run: dict[str, tuple[float, int]]


def host_clock_dates(runs: Path) -> dict[str, str]:
    """run name -> the date (YYYY-MM-DD) its clocked host steps were measured (CLOCK_RUN_PARTS' meta)."""
    out: dict[str, str] = {}
    for part in CLOCK_RUN_PARTS:
        for folder in sorted(runs.glob(f"*/{part}")):
            meta = json.loads((folder / "host_context.json").read_text()).get("meta", {})
            out[folder.parent.name] = str(meta.get("date_utc", ""))[:10]
    return out


def host_clock_samples(runs: Path, trace_clock_us: dict[str, float]) -> dict[str, list[float]]:
    """run name -> one reference-clock sample per clocked eager step of a fit model in its CLOCK_RUN_PARTS: the
    host clock just after the step's timing (just before its trace) / the trace's host speed (the median over
    its traced steps, against `trace_clock_us`)."""
    from sim.costmodel.trace_host import trace_host_speed
    from sim.validate.host import host_cases, host_clock_us, traced_steps

    out: dict[str, list[float]] = {}
    if not trace_clock_us:
        return out
    for part in CLOCK_RUN_PARTS:
        for folder in sorted(runs.glob(f"*/{part}")):
            for c in host_cases(folder):
                after = host_clock_us((c.record.get("host_clock") or {}).get("after", {}))
                if after is None or c.record.get("model") not in FIT_MODELS or c.record.get("mode") not in FIT_MODES:
                    continue
                speed = statistics.median(trace_host_speed(st, trace_clock_us) for st in traced_steps(c.trace))
                out.setdefault(folder.parent.name, []).append(after / speed)
    return out


def fit_host_clock(samples: dict[str, list[float]], resamples: int = 1000, seed: int = 20261201) -> HostClockFit | None:
    """host.clock_us from host_clock_samples: the median over all samples; its spread the 5th-95th percentile
    of that median over `resamples` bootstrap copies (each run's samples resampled within the run, so a run
    with many steps keeps its weight). None without samples; no spread below three."""
    import random

    pooled = [x for xs in samples.values() for x in xs]
    if not pooled:
        return None
    value = statistics.median(pooled)
    spread = None
    if len(pooled) >= 3:
        rng = random.Random(seed)
        meds = sorted(statistics.median([xs[rng.randrange(len(xs))] for _, xs in sorted(samples.items()) for _ in xs])
                      for _ in range(resamples))
        lo, hi = meds[int(0.05 * (resamples - 1))], meds[int(round(0.95 * (resamples - 1)))]
        spread = (round(min(lo, value), 3), round(max(hi, value), 3))
    per_run = {run: (round(statistics.median(xs), 3), len(xs)) for run, xs in sorted(samples.items())}
    return HostClockFit(round(value, 3), spread, len(pooled), per_run)


def host_clock_values(runs: Path, trace_clock_us: dict[str, float]) -> list[Any]:
    """host.clock_us as a fitted value (fit_host_clock over host_clock_samples); none without clocked steps."""
    from sim.calibrate.fit import Fitted

    fit = fit_host_clock(host_clock_samples(runs, trace_clock_us))
    if fit is None:
        return []
    dates = host_clock_dates(runs)
    runs_text = ", ".join(f"{run} ({dates.get(run) or '?'}) {us:g} us ({k})" for run, (us, k) in fit.per_run.items())
    text = (f"median over {fit.n} eager GPT steps of the calibration runs' host steps ({'|'.join(CLOCK_RUN_PARTS)}) "
            "of (host clock just before the step's trace: geometric mean of torch.empty / view / 16-element add, "
            "us per call in a tight loop) / (that trace's host speed against host.trace_profiler.clock_us); "
            f"per run: {runs_text}; spread: bootstrap of the median, steps resampled within each run")
    return [Fitted("host", "clock_us", fit.value, f"../{CLOCK_RUNS}", text, n=fit.n, spread=fit.spread,
                   date=max((dates.get(run) or "" for run in fit.per_run), default="") or None)]


# The level-aware clock -> speed relation (issue 15). The host runs at one of two levels (the tight-loop clock
# ~3.3-3.8 us fast, ~5.7-6.7 us slow on every H200 VM so far), switching within seconds. What the host costs are
# priced in is the trace host speed (trace_host_speed: the traced aten::empty / cudaLaunchKernel against
# host.trace_profiler.clock_us), the unit the framework-op table is normalised by; the clock read just before a
# step's trace (`after`) relates to that trace's speed as speed = (clock / reference) ** exponent, a line in logs
# fitted over the calibration-split runs' clocked eager forward steps (decode and inference: every op on the
# main thread, which the clock times). Training steps are left out: their backward runs on the autograd engine's
# own thread, whose speed the main thread's clock does not follow (their trace speed barely moves with the clock:
# slope 0.14 over 50 steps). Where clock_level.apply is true, own-speed rows and replay --host-clock price a step
# at that speed instead of clock / host.clock_us (figures at APPLY_CLOCK_LEVEL).
CLOCK_LEVEL_RUNS = ("runs/*/host_cold", "runs/*/host_warm", "wave*/host_cold")  # under calibration/<gpu>/
CLOCK_LEVEL_PHASES = frozenset({"decode", "inference_mode", "no_grad"})
# Whether the shipped fit applies the relation (host.clock_level.apply). Measured with it on (exponent 0.765,
# reference 7.543 us: the fit of the six runs before wave13_O joined; with it 0.722 / 7.802 us, with wave14_J too
# 0.664 / 8.134 us, with wave15_I too 0.647 / 8.147 us, with wave16_AA too 0.668 / 8.058 us,
# with wave17_AB too 0.696 / 7.846 us, with wave18_AC too 0.73 / 7.568 us, with wave19_AD too 0.739 / 7.532 us, with wave20_AE too
# 0.732 / 7.653 us,
# none re-measured;
# --host model at each held-out step's own speed, validate's own-speed rows, median / max |error| off -> on): decode Y
# (unseen) 2.0 / 5.1 -> 8.3 / 13.5 %, L 9.2 / 16.9 -> 6.5 / 14.8 %, M 15.0 / 26.4 -> 13.3 / 24.3 %, N 13.5 / 24.6 ->
# 21.0 / 30.3 %; eager inference Y 2.5 / 3.2 -> 4.0 / 9.1 %, L 15.0 / 48.2 -> 14.5 / 49.9 %, M 17.2 / 25.8 -> 9.6 /
# 24.3 %, N 3.8 / 18.0 -> 10.7 / 10.9 %; compiled inference Y 6.2 / 17.0 -> 1.3 / 15.6 %, L 25.7 / 28.0 -> 26.3 / 31.8
# %, M 12.2 / 40.4 -> 10.7 / 43.4 %, N 28.4 / 31.6 -> 34.0 / 37.7 %. The fast-level steps come out a little longer
# (better on L and M), the slow-level ones ~8 % shorter (worse on Y and N): the relation is what the traces' own
# speeds say, but the table under-prices decode and llama's ops by 10-25 % at a given trace speed (what
# host.missing_framework_ops would close), and the linear relation against the lower host.clock_us happened to hide
# that at the slow level. Crosses tripwires (own-speed decode and eager inference on Y and N), so it stays off.
APPLY_CLOCK_LEVEL = False


@dataclass(frozen=True)
class ClockLevelFit:
    """host.clock_level: speed = (clock / reference_us) ** exponent, least squares in logs over the samples;
    90 % bootstrap intervals (steps resampled within each run); per run its steps; the clock range."""

    exponent: float
    exponent_spread: tuple[float, float] | None
    reference_us: float
    reference_spread: tuple[float, float] | None
    n: int
    per_run: dict[str, int]
    clock_range: tuple[float, float]
    speed_range: tuple[float, float]


def clock_level_samples(root: Path, trace_clock_us: dict[str, float]) -> dict[str, list[tuple[float, float]]]:
    """run -> (host clock just before the trace, the trace's host speed: median over its traced steps) per clocked
    eager forward step (CLOCK_LEVEL_PHASES) of the calibration runs under `root` (CLOCK_LEVEL_RUNS)."""
    from sim.costmodel.trace_host import trace_host_speed
    from sim.validate.host import host_cases, host_clock_us, traced_steps

    out: dict[str, list[tuple[float, float]]] = {}
    if not trace_clock_us:
        return out
    folders = sorted({f for pattern in CLOCK_LEVEL_RUNS for f in root.glob(pattern) if (f / "host_context.json").is_file()})
    for folder in folders:
        run = folder.parent.name
        for c in host_cases(folder):
            after = host_clock_us((c.record.get("host_clock") or {}).get("after", {}))
            if after is None or c.record.get("mode") != "eager" or c.record.get("phase") not in CLOCK_LEVEL_PHASES:
                continue
            speed = statistics.median(trace_host_speed(st, trace_clock_us) for st in traced_steps(c.trace))
            out.setdefault(run, []).append((after, speed))
    return out


def _log_line(points: list[tuple[float, float]]) -> tuple[float, float] | None:
    """(exponent, reference) of log speed = exponent x (log clock - log reference), least squares; None when the
    clocks do not vary or the slope is not positive."""
    xs = [math.log(c) for c, _ in points]
    ys = [math.log(v) for _, v in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx <= 0:
        return None
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    if slope <= 0:
        return None
    return slope, math.exp(mx - my / slope)


def fit_clock_level(samples: dict[str, list[tuple[float, float]]], resamples: int = 1000,
                    seed: int = 20261201) -> ClockLevelFit | None:
    """host.clock_level from clock_level_samples; None with fewer than three samples or no positive slope."""
    import random

    pooled = [p for ps in samples.values() for p in ps]
    line = _log_line(pooled) if len(pooled) >= 3 else None
    if line is None:
        return None
    rng = random.Random(seed)
    boots = []
    for _ in range(resamples):
        pick = [ps[rng.randrange(len(ps))] for _, ps in sorted(samples.items()) for _ in ps]
        b = _log_line(pick)
        if b is not None:
            boots.append(b)
    exponent, reference = line
    spreads = []
    for k, value in ((0, exponent), (1, reference)):
        vals = sorted(b[k] for b in boots)
        lo, hi = vals[int(0.05 * (len(vals) - 1))], vals[int(round(0.95 * (len(vals) - 1)))]
        spreads.append((round(min(lo, value), 3), round(max(hi, value), 3)))
    clocks = [c for c, _ in pooled]
    speeds = [v for _, v in pooled]
    return ClockLevelFit(round(exponent, 3), spreads[0], round(reference, 3), spreads[1], len(pooled),
                         {run: len(ps) for run, ps in sorted(samples.items())}, (min(clocks), max(clocks)),
                         (min(speeds), max(speeds)))


def clock_level_values(root: Path, trace_clock_us: dict[str, float], apply: bool = APPLY_CLOCK_LEVEL) -> list[Any]:
    """host.clock_level as a fitted value (fit_clock_level over clock_level_samples); none without samples."""
    from sim.calibrate.fit import Fitted

    fit = fit_clock_level(clock_level_samples(root, trace_clock_us))
    if fit is None:
        return []
    dates = host_clock_dates_in(root, fit.per_run)
    runs_text = ", ".join(f"{run} ({dates.get(run) or '?'}) {k}" for run, k in fit.per_run.items())
    text = (f"least squares of log(trace host speed) on log(host clock) over {fit.n} clocked eager decode / inference "
            "steps of the calibration runs (host clock just before the step's trace: geometric mean of torch.empty / "
            "view / 16-element add, us per call in a tight loop; trace host speed: median over its traced steps of "
            "aten::empty / cudaLaunchKernel against host.trace_profiler.clock_us) at both host levels "
            f"(clocks {fit.clock_range[0]:.2f}-{fit.clock_range[1]:.2f} us, speeds {fit.speed_range[0]:.3f}-"
            f"{fit.speed_range[1]:.3f}); steps per run: {runs_text}; training steps left out (their backward runs on "
            "the autograd thread, which the main thread's clock does not time); spread (exponent) and "
            "reference_spread: bootstrap, steps resampled within each run")
    value: dict[str, Any] = {"exponent": fit.exponent, "reference_us": fit.reference_us, "apply": apply}
    if fit.reference_spread is not None:
        value["reference_spread"] = list(fit.reference_spread)
    return [Fitted("host", "clock_level", value, "..", text, n=fit.n, spread=fit.exponent_spread,
                   date=max((d for d in dates.values() if d), default="") or None)]


# In-context prices of the framework ops the table lacks, by op class (issue 15; host.missing_framework_op_classes,
# sim.costmodel.host.framework_op_class: views, ops a torch.nn layer calls as its forward, other functional ops).
# The table comes from the GPT model's steps; decode calls ops those lack (index_copy_, slice, unsqueeze), llama
# many more (mul, neg, cat, silu, rms_norm, slice, chunk), which --host model priced at their tight-loop cost
# (1.3-9 us where in context they take 11-61 us). Fitted from the calibration runs' (CLOCK_LEVEL_RUNS, never a
# validated folder) eager decode / inference steps (CLOCK_LEVEL_PHASES: no autograd recording) the way the table
# was (trace_op_samples: duration less host.profiler_event_us per event, plus the Python gap before it under
# GAP_CAP_US), every trace brought to the reference host speed (its median traced-step speed against
# host.trace_profiler.clock_us). Per class: the median over its ops of each op's median over calls; spread: 90 %
# bootstrap, runs resampled. A trace an importer cannot read whole is left out (counted in the fit text).
# Whether the shipped fit applies them. Measured with all three on (view 12.06, module 61.85, functional 25.08 us: the
# fit before machine J's run (wave14_J) joined; validate's host groups, h200-measured otherwise shipped; median / max |error| off
# -> on): --host model at each held-out step's own speed, decode L 9.2 / 16.9 -> 3.4 / 7.2 %, M 15.0 / 26.4 -> 13.0 /
# 22.6 %, N 13.5 / 24.6 -> 3.7 / 15.9 %, O 12.0 / 17.7 -> 5.6 / 8.4 %, but Y (unseen) 2.0 / 5.1 -> 12.9 / 14.2 %; eager
# inference M 17.2 / 25.8 -> 4.4 / 13.9 %, L 15.0 / 48.2 -> 15.3 / 27.5 %, but Y 2.5 / 3.2 -> 29.8 / 36.3 %, N 3.8 /
# 18.0 -> 13.1 / 24.5 %; own-speed compile gain (v22_host10) O 12.5 -> 8.4 pp, but Y 9.0 -> 15.5, L 16.8 -> 19.2, M 4.7
# -> 17.7, N 17.5 -> 33.6 pp; at the reference speed decode A-C (unseen) 10.8 / 50.5 -> 22.4 / 68.3 %, F 2.7 / 10.5 ->
# 10.4 / 23.4 %, eager inference Y 83.1 -> 119.1 %. 40 tripwires cross, so they stay off. What the rows say: the
# fast-level machines' decode and llama steps (L, M, N's decode, O) come right at their own speed, machine Y's, right
# without them, come out long, the pattern host.missing_framework_ops.ratio showed (PRICE_MISSING_IN_CONTEXT) at a
# third of its over-pricing: the in-context prices are what the calibration traces say at their own trace speed,
# and the shared ops (linear, layer_norm, SDPA) cost more there than the GPT table too, so the residual is the
# clock-to-speed relation and the table's level, not only the missing ops.
APPLY_MISSING_CLASSES = False


@dataclass(frozen=True)
class MissingClassFit:
    """Per op class: (its in-context us per call at the reference speed, 90 % bootstrap interval, calls, ops);
    the runs and traces read, the traces left out."""

    classes: dict[str, tuple[float, tuple[float, float] | None, int, dict[str, float]]]
    runs: tuple[str, ...]
    traces: int
    skipped: int


# run -> framework op -> its in-context us per call at the reference speed, over the calibration runs' eager decode /
# inference steps; with the traces read and left out. Per process and arguments: the class fit and the level fit share it.
_CALIBRATION_SAMPLES: dict[tuple[Any, ...], tuple[dict[str, dict[str, list[float]]], int, int]] = {}
# the same key -> per trace read: (run, its host speed, op -> its calls' in-context us at the reference speed)
_CALIBRATION_TRACES: dict[tuple[Any, ...], list[tuple[str, float, dict[str, list[float]]]]] = {}


def calibration_op_samples(root: Path, per_event_us: dict[str, float], trace_clock_us: dict[str, float],
                           ) -> tuple[dict[str, dict[str, list[float]]], int, int]:
    """run -> ATen framework op -> in-context us per call at the reference speed (trace_op_samples' plain calls), over
    the eager decode / inference steps (CLOCK_LEVEL_PHASES) of the calibration runs under `root` (CLOCK_LEVEL_RUNS);
    with the traces read and left out. Each trace is imported once (traced_steps: the clock-level fit's import)."""
    from sim.costmodel.trace_host import trace_host_speed
    from sim.errors import InputError
    from sim.validate.host import host_cases, traced_steps

    key = (str(root.resolve()), tuple(sorted(per_event_us.items())), tuple(sorted(trace_clock_us.items())))
    if key in _CALIBRATION_SAMPLES:
        return _CALIBRATION_SAMPLES[key]
    out: dict[str, dict[str, list[float]]] = {}
    traces: list[tuple[str, float, dict[str, list[float]]]] = []
    read = skipped = 0
    if not trace_clock_us or not per_event_us:
        return out, read, skipped
    folders = sorted({f for pattern in CLOCK_LEVEL_RUNS for f in root.glob(pattern) if (f / "host_context.json").is_file()})
    for folder in folders:
        run = folder.parent.name
        for c in host_cases(folder):
            if c.record.get("mode") != "eager" or c.record.get("phase") not in CLOCK_LEVEL_PHASES:
                continue
            try:
                steps = traced_steps(c.trace)  # imported once: clock_level_samples read them first
                speed = statistics.median(trace_host_speed(st, trace_clock_us) for st in steps)
                samples = trace_op_samples(c.trace, per_event_us, {}, speed, steps)
            except InputError:
                skipped += 1
                continue
            read += 1
            ops = {name: smp.plain for name, smp in samples.items() if name.startswith("aten::") and smp.plain}
            traces.append((run, speed, ops))
            for name, v in ops.items():
                out.setdefault(run, {}).setdefault(name, []).extend(v)
    _CALIBRATION_SAMPLES[key] = (out, read, skipped)
    _CALIBRATION_TRACES[key] = traces
    return out, read, skipped


def calibration_trace_samples(root: Path, per_event_us: dict[str, float], trace_clock_us: dict[str, float],
                              ) -> list[tuple[str, float, dict[str, list[float]]]]:
    """Per calibration trace calibration_op_samples read: (run, its host speed, op -> in-context us per call)."""
    calibration_op_samples(root, per_event_us, trace_clock_us)
    key = (str(root.resolve()), tuple(sorted(per_event_us.items())), tuple(sorted(trace_clock_us.items())))
    return _CALIBRATION_TRACES.get(key, [])


def missing_class_samples(root: Path, table: set[str], per_event_us: dict[str, float],
                          trace_clock_us: dict[str, float]) -> tuple[dict[str, dict[str, list[float]]], int, int]:
    """run -> framework op the table (`table`: its op names) lacks -> in-context us per call at the reference speed,
    over the eager decode / inference steps of the calibration runs under `root`; with the traces read and left out."""
    samples, read, skipped = calibration_op_samples(root, per_event_us, trace_clock_us)
    out = {run: {name: v for name, v in ops.items() if name not in table} for run, ops in samples.items()}
    return {run: ops for run, ops in out.items() if ops}, read, skipped


def _class_medians(samples: dict[str, dict[str, list[float]]]) -> dict[str, tuple[float, int, dict[str, float]]]:
    from sim.costmodel.host import framework_op_class

    per_op: dict[str, list[float]] = {}
    for ops in samples.values():
        for name, v in ops.items():
            per_op.setdefault(name, []).extend(v)
    by: dict[str, dict[str, float]] = {}
    calls: dict[str, int] = {}
    for name, v in sorted(per_op.items()):
        cls = framework_op_class(name)
        by.setdefault(cls, {})[name] = statistics.median(v)
        calls[cls] = calls.get(cls, 0) + len(v)
    return {cls: (statistics.median(ops.values()), calls[cls], ops) for cls, ops in by.items()}


def fit_missing_classes(samples: dict[str, dict[str, list[float]]], read: int = 0, skipped: int = 0,
                        resamples: int = 200, seed: int = 20261201) -> MissingClassFit | None:
    """host.missing_framework_op_classes from missing_class_samples; None without samples."""
    import random

    whole = _class_medians(samples)
    if not whole:
        return None
    rng = random.Random(seed)
    runs = sorted(samples)
    boots: dict[str, list[float]] = {}
    for _ in range(resamples):
        pick: dict[str, dict[str, list[float]]] = {}
        for k in range(len(runs)):
            pick[f"{k}"] = samples[runs[rng.randrange(len(runs))]]
        for cls, (value, _, _) in _class_medians(pick).items():
            boots.setdefault(cls, []).append(value)
    classes = {}
    for cls, (value, calls, ops) in sorted(whole.items()):
        vals = sorted(boots.get(cls, []))
        spread = ((round(min(vals[int(0.05 * (len(vals) - 1))], value), 2),
                   round(max(vals[int(round(0.95 * (len(vals) - 1)))], value), 2)) if vals else None)
        classes[cls] = (round(value, 2), spread, calls, {n: round(v, 2) for n, v in ops.items()})
    return MissingClassFit(classes, tuple(runs), read, skipped)


def missing_class_values(root: Path, table: set[str], per_event_us: dict[str, float], trace_clock_us: dict[str, float],
                         apply: bool = APPLY_MISSING_CLASSES) -> list[Any]:
    """host.missing_framework_op_classes as fitted values (fit_missing_classes); none without samples."""
    from sim.calibrate.fit import Fitted

    samples, read, skipped = missing_class_samples(root, table, per_event_us, trace_clock_us)
    fit = fit_missing_classes(samples, read, skipped)
    if fit is None:
        return []
    dates = host_clock_dates_in(root, {run: 1 for run in fit.runs})
    out = []
    for cls, (value, spread, calls, ops) in fit.classes.items():
        text = (f"median over the {cls} framework ops the table lacks of each op's median in-context host time per call "
                "(duration less host.profiler_event_us per event, plus the Python gap before it under 100 us, at the "
                "reference host speed: / the trace's median traced-step speed against host.trace_profiler.clock_us) "
                f"in the eager decode / inference traces of the calibration runs {', '.join(fit.runs)} ({fit.traces} "
                f"traces; {fit.skipped} left out: a step the importer cannot read); ops: "
                + ", ".join(f"{n} {v:g}" for n, v in ops.items())
                + " us; spread: bootstrap, runs resampled")
        out.append(Fitted("host.missing_framework_op_classes", cls, {"value": value, "apply": apply}, "..", text,
                          n=calls, spread=spread, date=max((d for d in dates.values() if d), default="") or None))
    return out


# The table's level against the calibration runs (issue 15, host11; host.framework_op_level). The table
# (host.framework_ops) holds the in-context prices of the GPT fit traces (host_context, machines A-C, 2026-11-30, no
# host clock recorded) at the reference trace speed (host.trace_profiler.clock_us: those traces' own median
# aten::empty / cudaLaunchKernel). The calibration runs' eager decode / inference traces (CLOCK_LEVEL_RUNS, never a
# validated folder), brought to that same trace speed, pay more for the very ops the table has, GPT's own inference
# steps included (the same model and config as the table's inference trace): the trace speed does not carry the
# table's level over to those runs. The level: per op the table prices without autograd recording (`us`) and the
# calibration traces call at least MIN_LEVEL_CALLS times, its median in-context host time per call there over the
# table's price; the factor is the median over those ops (one factor: per class and per model the medians lie inside
# one another's run-bootstrap intervals, see the fit text); spread: 90 % bootstrap, runs resampled.
MIN_LEVEL_CALLS = 3
# Whether the shipped fit applies it (host.framework_op_level.apply: the table's `us` prices times the factor).
# Measured with it on (1.263, the fit before machine AA: 81 traces of 11 runs, 13 ops; per class functional 1.23,
# view 1.31, module 1.36; per model llama 1.23, GPT inference 1.27, GPT decode 1.27; per run 1.14 (Y) to 1.48 (M);
# log level on log trace speed slope 0.224 over the 81 traces), validate's host groups on main 51527be's profile,
# median / max |error| off -> on: own-speed decode Y (unseen) 2.0 / 5.1 -> 26.7 / 27.4 %, L 9.2 / 16.9 -> 13.7 /
# 17.0 %, M 15.0 / 26.4 -> 9.0 / 37.8 %, N 13.5 / 24.6 -> 7.1 / 14.7 %, O 12.0 / 17.7 -> 9.2 / 20.7 %, I 15.9 ->
# 10.6 %; own-speed eager inference Y 2.5 / 3.2 -> 18.2 / 25.8 %, L 15.0 -> 9.8 %, M 17.2 -> 10.8 %, O 22.8 -> 19.5
# %; own-speed compile gain Y 9.0 -> 18.1, L 16.8 -> 35.9, M 4.7 -> 31.6, N 17.5 -> 29.8, I 1.6 -> 11.7 pp
# (eager steps dearer, compiled ones not); trace predict unchanged. 84 tripwires cross; with
# missing_framework_op_classes on too 103, with clock_level on as well 111. Off.
APPLY_TABLE_LEVEL = False
# The level as a function of host speed (host.framework_op_speed_level; issue 15, host12): level(s) = L0 x s ** exponent,
# fitted on the same traces (fit_table_level's speed_slope / speed_l0), applied only where a step is priced at a
# given host speed (own-speed rows, replay --host-clock / --host-speed): framework ops then follow their own clock
# exponent (~ clock_level's x (1 + exponent)); reference-speed pricing keeps the table (its rows do not move).
# Measured with it on (L0 1.37, exponent 0.224: the fit before machine AB; main 4253df8's held-out machines; python
# scripts/host_level_check.py --own-only, own-speed rows median / max |error| %, off -> on): decode Y (unseen) 2.0 /
# 5.1 -> 36.8 / 36.9, L 9.2 -> 8.6, M 15.0 / 26.4 -> 9.2 / 40.4, N 13.5 -> 11.4, O 12.0 -> 19.8, I 15.9 -> 6.4 / 45.1,
# J 11.6 -> 19.9, AA 15.8 -> 40.2; eager inference Y 2.5 -> 14.0, L 15.0 -> 9.9, M 17.2 -> 13.6, N 3.8 -> 19.7, O 22.8
# -> 17.8, J 11.9 -> 26.5; compiled rows unchanged; own-speed compile gain median |pp| Y 9.0 -> 17.1, L 16.8 -> 28.0,
# M 4.7 -> 29.5, N 17.5 -> 28.5, I 1.7 -> 8.0, AA 8.0 -> 12.2, O 12.5 -> 3.1, J 4.8 -> 3.8. 25 tripwires cross (the
# whole host check, scripts/host_level_check.py without --own-only); with clock_level too 31, with the missing classes
# 37, classes + clock_level 46, with compiled_in_context.kernel_us 39 (own-speed groups). L0 = 1 (the table's level
# at speed 1, only the trend): 28 (fast machines' eager rows shorter: L decode 19.6, M 24.0 %). No level that is a
# function of the trace speed alone serves machine Y (right at level 1 at its slow clock) and the fast machines
# (short by 10-25 % at theirs) at once. Compile gains worsen because the level raises eager steps only: at their own
# speed (off) the compiled inference steps of L, M, N are short too (signed medians -25.7, -12.2, -28.4 %; eager
# -15.0, -17.2, -3.8 %). The compiled wrapper's cost per kernel carries no table level: fit_compiled_kernel's measure
# on each calibration run's compiled GPT forwards (3 regions each, at the reference trace speed) gives V 41.2, X 37.4,
# Y 39.8, L 37.2, calib7 46.7, M 42.2, N 33.3, O 33.5, J 39.7, I 35.8, AA 32.7, K 34.2 us against the fit traces'
# 37.54 (compiled_in_context.kernel_us); --host model prices those kernels at tight-loop costs (~15-24 us) while
# kernel_us is off, and with it on the fast machines' compiled rows come out 35-45 % long at their own speed (20
# own-speed tripwires alone). Off.
APPLY_SPEED_LEVEL = False


@dataclass(frozen=True)
class TableLevelFit:
    """The factor (calibration traces' in-context price / the table's, median over ops), its 90 % bootstrap interval,
    per op (ratio, calls), per op class the median ratio, the runs, the calls."""

    value: float
    spread: tuple[float, float] | None
    ops: dict[str, tuple[float, int]]
    by_class: dict[str, float]
    runs: tuple[str, ...]
    calls: int
    # how the level moves with the trace's host speed: least squares of log(a trace's level) on log(its speed) over
    # the traces (slope, its 90 % bootstrap interval with traces resampled within runs, traces); None without traces
    speed_slope: tuple[float, tuple[float, float] | None, int] | None = None
    # the same least squares' level at speed 1, L0 = exp(intercept), and its 90 % bootstrap interval (the same
    # resamples): level(speed) = L0 * speed ** slope (host.framework_op_speed_level); None without traces
    speed_l0: tuple[float, tuple[float, float] | None] | None = None


def _level_ratios(samples: dict[str, dict[str, list[float]]], table_us: dict[str, float],
                  min_calls: int = MIN_LEVEL_CALLS) -> dict[str, tuple[float, int]]:
    per_op: dict[str, list[float]] = {}
    for ops in samples.values():
        for name, v in ops.items():
            if name in table_us and table_us[name] > 0:
                per_op.setdefault(name, []).extend(v)
    return {name: (statistics.median(v) / table_us[name], len(v)) for name, v in sorted(per_op.items())
            if len(v) >= min_calls}


def _speed_fit(traces: list[tuple[str, float, dict[str, list[float]]]], table_us: dict[str, float],
               resamples: int = 200, seed: int = 20261201,
               ) -> tuple[tuple[float, tuple[float, float] | None, int], tuple[float, tuple[float, float] | None]] | None:
    """Least squares of log(level) on log(speed) over the traces (each trace's level: the median over its ops of the
    table's ratio): ((slope, its 90 % bootstrap interval, traces), (L0 = exp(intercept), its interval)); the
    bootstrap resamples traces within runs."""
    import random

    by_run: dict[str, list[tuple[float, float]]] = {}
    for run, speed, ops in traces:
        ratios = _level_ratios({run: ops}, table_us)
        if ratios and speed > 0:
            by_run.setdefault(run, []).append((math.log(speed), math.log(statistics.median(r for r, _ in ratios.values()))))

    def line(points: list[tuple[float, float]]) -> tuple[float, float] | None:
        mx, my = statistics.fmean(x for x, _ in points), statistics.fmean(y for _, y in points)
        sxx = sum((x - mx) ** 2 for x, _ in points)
        if sxx <= 0:
            return None
        b = sum((x - mx) * (y - my) for x, y in points) / sxx
        return b, math.exp(my - b * mx)

    pooled = [p for ps in by_run.values() for p in ps]
    whole = line(pooled) if len(pooled) >= 3 else None
    if whole is None:
        return None
    rng = random.Random(seed)
    boots = [b for b in (line([ps[rng.randrange(len(ps))] for _, ps in sorted(by_run.items()) for _ in ps])
                         for _ in range(resamples)) if b is not None]

    def interval(xs: list[float], at: float) -> tuple[float, float] | None:
        xs = sorted(xs)
        return ((round(min(xs[int(0.05 * (len(xs) - 1))], at), 3), round(max(xs[int(round(0.95 * (len(xs) - 1)))], at), 3))
                if xs else None)

    return ((round(whole[0], 3), interval([b for b, _ in boots], whole[0]), len(pooled)),
            (round(whole[1], 3), interval([a for _, a in boots], whole[1])))


def fit_table_level(samples: dict[str, dict[str, list[float]]], table_us: dict[str, float],
                    resamples: int = 200, seed: int = 20261201,
                    traces: list[tuple[str, float, dict[str, list[float]]]] | None = None) -> TableLevelFit | None:
    """host.framework_op_level from calibration_op_samples and the table's `us` prices (with `traces`,
    calibration_trace_samples, how it moves with the trace speed too); None without a shared op."""
    import random

    from sim.costmodel.host import framework_op_class

    ratios = _level_ratios(samples, table_us)
    if not ratios:
        return None
    value = statistics.median(r for r, _ in ratios.values())
    rng = random.Random(seed)
    runs = sorted(samples)
    boots = []
    for _ in range(resamples):
        pick = {f"{k}": samples[runs[rng.randrange(len(runs))]] for k in range(len(runs))}
        picked = _level_ratios(pick, table_us)
        if picked:
            boots.append(statistics.median(x for x, _ in picked.values()))
    boots.sort()
    spread = ((round(min(boots[int(0.05 * (len(boots) - 1))], value), 3),
               round(max(boots[int(round(0.95 * (len(boots) - 1)))], value), 3)) if boots else None)
    by: dict[str, list[float]] = {}
    for name, (r, _) in ratios.items():
        by.setdefault(framework_op_class(name), []).append(r)
    speed = _speed_fit(traces, table_us) if traces else None
    return TableLevelFit(round(value, 3), spread, {n: (round(r, 3), k) for n, (r, k) in ratios.items()},
                         {cls: round(statistics.median(v), 3) for cls, v in sorted(by.items())}, tuple(runs),
                         sum(k for _, k in ratios.values()), speed[0] if speed else None, speed[1] if speed else None)


def table_level_values(root: Path, table: dict[str, dict[str, float]], per_event_us: dict[str, float],
                       trace_clock_us: dict[str, float], apply: bool = APPLY_TABLE_LEVEL,
                       apply_speed: bool = APPLY_SPEED_LEVEL) -> list[Any]:
    """host.framework_op_level and host.framework_op_speed_level as fitted values (fit_table_level); none without
    samples."""
    from sim.calibrate.fit import Fitted

    samples, read, skipped = calibration_op_samples(root, per_event_us, trace_clock_us)
    table_us = {name: float(e["us"]) for name, e in table.items() if e.get("us") is not None}
    fit = fit_table_level(samples, table_us, traces=calibration_trace_samples(root, per_event_us, trace_clock_us))
    if fit is None:
        return []
    slope = ""
    if fit.speed_slope is not None:
        b, b_spread, k = fit.speed_slope
        slope = (f"; not constant: log(a trace's level) on log(its host speed) has slope {b:g}"
                 + (f" [{b_spread[0]:g}, {b_spread[1]:g}]" if b_spread else "")
                 + f" over {k} traces (bootstrap, traces resampled within runs; not applied)")
    dates = host_clock_dates_in(root, {run: 1 for run in fit.runs})
    text = ("median over the framework ops the table prices without autograd recording and the calibration runs' "
            f"eager decode / inference traces call (at least {MIN_LEVEL_CALLS} times) of (their median in-context "
            "host time per call there: duration less host.profiler_event_us per event, plus the Python gap before it "
            "under 100 us, / the trace's median traced-step speed against host.trace_profiler.clock_us) / (the "
            f"table's us); runs {', '.join(fit.runs)} ({read} traces; {skipped} left out: a step the importer cannot "
            "read); per op ratio (calls): " + ", ".join(f"{n} {r:g} ({k})" for n, (r, k) in fit.ops.items())
            + "; median per op class: " + ", ".join(f"{c} {v:g}" for c, v in fit.by_class.items())
            + slope + "; spread: bootstrap, runs resampled")
    date = max((d for d in dates.values() if d), default="") or None
    out = [Fitted("host", "framework_op_level", {"value": fit.value, "apply": apply}, "..", text, n=fit.calls,
                  spread=fit.spread, date=date)]
    if fit.speed_slope is not None and fit.speed_l0 is not None:
        b, b_spread, k = fit.speed_slope
        l0, l0_spread = fit.speed_l0
        value: dict[str, Any] = {"value": l0, "exponent": b, "apply": apply_speed}
        if l0_spread is not None:
            value["value_spread"] = list(l0_spread)
        out.append(Fitted(
            "host", "framework_op_speed_level", value, "..",
            f"level(s) = L0 x s ** exponent: least squares of log(a trace's level) on log(its host speed s) over the "
            f"{k} traces of the framework_op_level fit (a trace's level: the median over its ops of (its in-context "
            "host time per call at the reference trace speed) / (the table's us); s: the trace's median traced-step "
            "speed against host.trace_profiler.clock_us); L0 = exp(intercept) " + f"{l0:g}"
            + (f" [{l0_spread[0]:g}, {l0_spread[1]:g}]" if l0_spread else "") + f", exponent {b:g}"
            + (f" [{b_spread[0]:g}, {b_spread[1]:g}]" if b_spread else "")
            + "; spread: the exponent's, bootstrap, traces resampled within runs", n=k, spread=b_spread, date=date))
    return out


def host_clock_dates_in(root: Path, runs: dict[str, int]) -> dict[str, str]:
    """run name -> the date (YYYY-MM-DD) of its clocked host steps, for the runs under `root` (CLOCK_LEVEL_RUNS)."""
    out: dict[str, str] = {}
    for pattern in CLOCK_LEVEL_RUNS:
        for folder in sorted(root.glob(pattern)):
            if folder.parent.name in runs and (folder / "host_context.json").is_file():
                meta = json.loads((folder / "host_context.json").read_text()).get("meta", {})
                out[folder.parent.name] = str(meta.get("date_utc", ""))[:10]
    return out


def trace_profiler_values(folder: Path) -> list[Any]:
    """host.trace_profiler (the profiler's cost in real steps at a reference host speed) as fitted values."""
    from sim.calibrate.fit import Fitted

    tp = fit_trace_profiler(folder)
    if tp is None:
        return []
    steps = len(tp.configs)
    out = [Fitted("host.trace_profiler.event_us", tp.config, tp.event_us, "../host_context",
                  f"median over {tp.n_event} eager GPT steps of (traced step span - the same step's host time without "
                  "the profiler, enqueue_us) / (recorded events x the trace's host speed)", n=tp.n_event)]
    if tp.kernel_record_us is not None:
        out.append(Fitted("host.trace_profiler.kernel_record_us", tp.config, tp.kernel_record_us, "../host_context",
                          f"median over {tp.n_record} compiled GPT forward steps of (their profiler cost / host speed - "
                          "event_us x events) / torch.compile kernel records", n=tp.n_record))
    out += [Fitted("host.trace_profiler.clock_us", name, us, "../host_context",
                   f"median traced duration over the {steps} trace-fit GPT steps (the reference host speed)", n=steps)
            for name, us in tp.clock_us.items()]
    return out


@dataclass(frozen=True)
class TraceProfilerFit:
    """host.trace_profiler for one profiler configuration (us), and what it was fitted on."""

    config: str
    event_us: float
    kernel_record_us: float | None
    clock_us: dict[str, float]
    n_event: int
    n_record: int
    configs: tuple[str, ...]


def _clock_samples(step: Any) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for o in step.events.cpu_ops:
        if o.name in CLOCK_OPS:
            out.setdefault(o.name, []).append(o.end - o.ts)
    for r in step.events.runtime:
        if r.name in CLOCK_OPS:
            out.setdefault(r.name, []).append(r.end - r.ts)
    return out


# trace path -> the imported step, read once per process: the bootstrap refits the profile fifteen
# times and the traces do not change between refits (the fit reads the steps, never edits them)
_STEPS: dict[str, Any] = {}


def _imported_step(path: Path) -> Any:
    from sim.ingest import import_trace

    key = str(Path(path).resolve())
    if key not in _STEPS:
        _STEPS[key] = import_trace(path)
    return _STEPS[key]


def fit_trace_profiler(host_context: Path) -> TraceProfilerFit | None:
    """The profiler's in-context cost from the trace-fit configs under `host_context`: every traced
    step was also timed without the profiler (`enqueue_us`: host time until the step's call returns),
    so (traced step span - enqueue_us) is what the profiler added there, over the step's recorded
    events. It runs at the host's speed: each step's difference is divided by its trace clock (the
    median duration of CLOCK_OPS in it against their median over all fit steps, the reference).
    event_us: median over the eager steps of difference / (events x speed); kernel_record_us: median
    over the compiled steps of what is left after event_us / (torch.compile kernel records x speed)."""
    from sim.costmodel.trace_host import profiler_config, trace_host_speed
    from sim.validate.host import host_cases

    cases = [c for c in host_cases(host_context) if c.trace_split == "fit" and c.record.get("enqueue_us")]
    if not cases:
        return None
    steps = [(c, _imported_step(c.trace)) for c in cases]
    configs = {profiler_config(st) for _, st in steps}
    if len(configs) != 1:
        raise ValueError(f"{host_context}: the fit traces mix profiler configurations {sorted(configs)}")
    samples: dict[str, list[float]] = {}
    for _, st in steps:
        for name, v in _clock_samples(st).items():
            samples.setdefault(name, []).extend(v)
    clock = {name: round(statistics.median(v), 3) for name, v in sorted(samples.items())}
    per_event, per_record = [], []
    speeds = {c.config: trace_host_speed(st, clock) for c, st in steps}
    for c, st in steps:
        if c.record.get("mode") != "eager":
            continue
        events = sum(o.trace_events for o in st.ops)
        added = (st.events.step.end - st.events.step.ts) - float(c.record["enqueue_us"])
        per_event.append(added / (events * speeds[c.config]))
    event_us = statistics.median(per_event)
    for c, st in steps:
        records = sum(o.kernel_records for o in st.ops)
        if c.record.get("mode") != "compiled" or records == 0:
            continue
        events = sum(o.trace_events for o in st.ops)
        added = (st.events.step.end - st.events.step.ts) - float(c.record["enqueue_us"])
        per_record.append((added / speeds[c.config] - event_us * events) / records)
    record_us = round(statistics.median(per_record), 2) if per_record and statistics.median(per_record) > 0 else None
    return TraceProfilerFit(configs.pop(), round(event_us, 3), record_us, clock, len(per_event), len(per_record),
                            tuple(c.config for c in cases))


def table_entries(table: dict[str, dict[str, float]], device: str, date: str, raw: str,
                  fit: str, foreach: ForeachBench | None = None) -> dict[str, dict[str, Any]]:
    """The profile's `host.framework_ops` table (sorted by op name), each entry with its provenance."""
    return {name: {**{k: e[k] for k in ("us", "grad_us") if k in e}, "calls": int(e["calls"]),
                   **({"tensors": int(e["tensors"]), "per_tensor_us": e["per_tensor_us"]} if "tensors" in e else {}),
                   "source": "measured",
                   "measured_on": device, "date": date, "raw": raw, "fit": fit + _foreach_text(e, foreach)}
            for name, e in sorted(table.items())}


def with_table(doc: dict[str, Any], entries: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A profile document with its `host.framework_ops` table replaced (kept in its place; a new
    table goes at the end of the host section); every other key as it was, in its order."""
    host = doc.get("host")
    if not isinstance(host, dict):
        raise ValueError("profile has no host section")
    return {**doc, "host": {**host, "framework_ops": entries}}


def main(argv: list[str] | None = None) -> int:
    """Fit the table from a host_context folder and write it into a profile (the profile is loaded, its
    table replaced and the whole document written again: only that table changes in a generated profile)."""
    import argparse

    from sim.calibrate.profile_yaml import dump_profile, load_profile_doc
    from sim.hardware import load_profile
    from sim.outputs import write_text_atomic

    ap = argparse.ArgumentParser(description="fit host.framework_ops from real models' traces into a profile")
    ap.add_argument("--host-context", required=True, type=Path, help="folder with host_context.json and traces")
    ap.add_argument("--profile", required=True, type=Path, help="profile YAML to update in place")
    ns = ap.parse_args(argv)
    hw = load_profile(str(ns.profile))
    import os

    per_event = {k: v * 1e6 for k, v in hw.profiler_event_s.items()}
    traces, configs, meta = fit_traces(ns.host_context)
    foreach = fit_foreach_bench(ns.host_context) if FOREACH_PER_TENSOR else None
    table = fit_table(traces, per_event, foreach=foreach)
    device, date = _device(meta)
    raw = os.path.relpath(ns.host_context, ns.profile.parent)
    doc, header = load_profile_doc(ns.profile.read_text())
    entries = table_entries(table, device, date, raw, _fit_text(configs), foreach)
    write_text_atomic(ns.profile, dump_profile(with_table(doc, entries), header))
    load_profile(str(ns.profile))  # the written profile must load
    print(f"wrote {len(table)} framework ops into {ns.profile}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
