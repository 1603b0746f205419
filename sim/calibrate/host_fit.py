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
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sim.costmodel.host import AUTOGRAD_NODE_PREFIX, GAP_CAP_US, op_key

# The host_context configs a fit may use: eager steps of the GPT model (training at four token
# counts and inference). Everything else there (llama, mlp, the decode step, compiled steps,
# CUDA graphs) validates.
FIT_MODELS = frozenset({"gpt"})
FIT_MODES = frozenset({"eager"})
# The profiler's in-context cost (host.trace_profiler) is fitted on the same GPT model, its eager
# steps (cost per event) and its compiled forward (cost per torch.compile kernel record): the trace
# rows of those configs are "calibrated", every other model's validate.
TRACE_FIT_MODES = frozenset({"eager", "compiled"})
# Reference ops of the trace clock: called in every eager or compiled step, the same host path
# whatever the model (an allocation; a kernel launch under CUPTI's callback).
CLOCK_OPS = ("aten::empty", "cudaLaunchKernel")
SKIP_PREFIXES = ("ProfilerStep#", "Torch-Compiled Region", "CompiledFunction", "cudaGraphLaunch")
# A foreach op's cost per tensor (fit_foreach_bench) is fitted and tested but not yet written into the
# shipped profile: priced per tensor, the unseen models' eager training steps improve (--host model
# A-C median 24.9 -> 10.1 %, machine F 30.4 -> 13.6 %) but the compiled MLP training steps fall to
# -10..-21 % (tripwire host/host_model/train_compiled/unseen 0.068 / 0.103 -> 0.120 / 0.208): the
# optimizer's flat overcharge (~700 us at 16 tensors) had hidden a compiled-training shortfall of about
# the same size (docs/host.md, "The optimizer per tensor"). True writes the per-tensor costs.
FOREACH_PER_TENSOR = False


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


def _trace_records(path: Path) -> list[tuple[str, float, int, float, bool, str, int]]:
    """The top-level CPU ops of every step of the trace, read once per process (a refit with other
    per-event costs, as the bootstrap does, needs only arithmetic)."""
    from sim.costmodel.trace_host import FOREACH_PREFIX, foreach_tensors
    from sim.ingest import import_trace
    from sim.ingest.build import _Counts
    from sim.ingest.kineto import read_step

    key = str(path.resolve())
    if key in _RECORDS:
        return _RECORDS[key]
    out = []
    first = read_step(path, None)
    for st in first.steps:
        ev = first if st.name == first.step.name else read_step(path, st.name)
        training = import_trace(path, st.name).training
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
                     ) -> dict[str, OpSamples]:
    """Add the in-context host time of every top-level CPU op of every step of the trace at `path`."""
    out = samples if samples is not None else {}
    for name, dur, inside, gap, grad, cfg, tensors in _trace_records(path):
        host = dur - per_event_us.get(cfg, 0.0) * inside + (gap if 0.0 <= gap < GAP_CAP_US else 0.0)
        s = out.setdefault(name, OpSamples())
        (s.grad if grad else s.plain).append(max(0.0, host))
        if tensors:
            s.tensors.append(tensors)
    return out


def fit_table(traces: list[Path], per_event_us: dict[str, float], min_calls: int = 3,
              foreach: ForeachBench | None = None) -> dict[str, dict[str, float]]:
    """Per op name: `us`, `grad_us` (medians, where there are at least `min_calls` calls) and `calls`;
    for a foreach op whose calls' list length is known, with the optimizer bench `foreach`: `tensors`
    (the median length) and `per_tensor_us`, the op's cost times the bench's per-tensor share at that
    length. NB: every foreach op of the step is assumed to split fixed and per-tensor cost as the whole
    bench step does (the bench times whole steps, not ops)."""
    samples: dict[str, OpSamples] = {}
    for p in traces:
        trace_op_samples(p, per_event_us, samples)
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


def fit_traces(host_context: Path) -> tuple[list[Path], list[str], dict[str, Any]]:
    """The traces of the fit split under `host_context` (one host_context.json, or one subfolder per
    machine), their config labels and the first run's meta."""
    from sim.validate.host import host_cases, machine_folders

    cases = [c for c in host_cases(host_context) if c.split == "fit"]
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
    table = fit_table(traces, per_event, foreach=foreach)
    fit = f"{_fit_text(configs)}; traces recorded {_device(meta)[1]} on the host_context machines"
    out = [Fitted("host.framework_ops", name, {k: (int(v) if k in ("calls", "tensors") else v) for k, v in entry.items()},
                  "../host_context", fit + _foreach_text(entry, foreach)) for name, entry in table.items()]
    return out + trace_profiler_values(folder)


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
