"""Fit a hardware profile from raw calibration data (no GPU needed).

Each fit is a small, named estimator over one group's records; it returns the value, the
records it used (so validation can report them apart from the held-out ones), and a
one-line description of the fit that goes into the profile's provenance. Values the raw
data cannot determine keep the base profile's number and provenance.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sim.calibrate.raw import RawData, held_out, kernel_time_us, record_id
from sim.errors import InputError
from sim.schema.hardware import HardwareProfileFile
from sim.schema.loader import load_yaml_model


@dataclass
class Fitted:
    """One fitted profile number."""

    section: str
    key: str
    value: float | dict[str, Any]
    raw: str
    fit: str
    used: set[str] = field(default_factory=set)


@dataclass
class FitResult:
    values: list[Fitted]
    gemm_correction: list[dict[str, Any]]
    notes: list[str]

    def used_ids(self) -> set[str]:
        out: set[str] = set()
        for f in self.values:
            out |= f.used
        for p in self.gemm_correction:
            out.add(p["id"])
        return out


def _median(xs: list[float]) -> float:
    return float(statistics.median(xs))


def _clock_hz(raw: RawData) -> float:
    smi = raw.meta.get("nvidia_smi") or {}
    mhz = smi.get("sm_clock_max_mhz") or 1980.0
    return float(mhz) * 1e6


def fit_copy(raw: RawData, sm_count: int) -> list[Fitted]:
    """Latency from persistent copies with few CTAs (Little's law, far below the knee); the
    fixed kernel cost from the smallest copies less one latency. The sustained ceiling and
    the knee exponent are fitted later against the model (fit_bandwidth_knee)."""
    out: list[Fitted] = []
    pers = [r for r in raw.records("copy", "copy_persistent") if r.get("ctas", 0) <= sm_count // 8]
    latency_ns = None
    if pers:
        lats = [int(r["ctas"]) * int(r.get("BLOCK", 4096)) * 2 / (r["gbps"] * 1e9) * 1e9 for r in pers]
        latency_ns = _median(lats)
        out.append(Fitted("memory", "latency_ns", round(latency_ns, 1), raw.file_of("copy"),
                          f"Little's law on {len(pers)} persistent copies with at most {sm_count // 8} CTAs "
                          "(one iteration's bytes in flight per CTA / bandwidth)",
                          {record_id(r) for r in pers}))
    gaps = [float(r["gap_us"]) for r in raw.records("stream_gaps")]
    tiny = [float(k["duration_us"]) for r in raw.records("kernel_configs") for k in r.get("kernels") or []
            if "Memset" not in k["name"] and isinstance(k.get("grid"), list)
            and k["grid"][0] * k["grid"][1] * k["grid"][2] <= 4 and k["duration_us"] < 2.0]
    if gaps and tiny:
        gap = _median(gaps)
        out.append(Fitted("kernel", "launch_gap_us", round(gap, 3), raw.file_of("stream_gaps"),
                          f"median idle gap between {len(gaps)} back-to-back GPU activities of one stream (profiler)"))
        fixed = _median(tiny) + gap
        out.append(Fitted("kernel", "fixed_us", round(fixed, 3), raw.file_of("kernel_configs"),
                          f"median profiled duration of {len(tiny)} kernels of at most 4 blocks, plus the stream gap"))
        small = [r for r in raw.records("copy", "copy") if not held_out(r) and r["bytes"] <= 64 << 10]
        if small and latency_ns is not None:
            # an event-timed tiny copy = events' overhead + the kernel (its minimum duration and one DRAM trip)
            ev = _median([r["time_us"] for r in small]) - (fixed - gap) - latency_ns * 1e-3
            out.append(Fitted("kernel", "event_timing_overhead_us", round(max(ev, 0.0), 3), raw.file_of("copy"),
                              f"median CUDA-event time of {len(small)} copies of <= 64 KiB less the kernel's minimum "
                              "duration and one memory latency", {record_id(r) for r in small}))
    else:
        small = [r for r in raw.records("copy", "copy") if not held_out(r) and r["bytes"] <= 64 << 10]
        if small and latency_ns is not None:
            fixed = _median([r["time_us"] for r in small]) - latency_ns * 1e-3
            out.append(Fitted("kernel", "fixed_us", round(max(fixed, 0.1), 3), raw.file_of("copy"),
                              f"median time of {len(small)} copies of <= 64 KiB less one memory latency",
                              {record_id(r) for r in small}))
    return out


def _grid_search(candidates: list[dict[str, float]], loss: Callable[[dict[str, float]], float]) -> dict[str, float]:
    best, best_loss = candidates[0], float("inf")
    for cand in candidates:
        val = loss(cand)
        if val < best_loss:
            best, best_loss = cand, val
    return best


def _log_loss(pairs: list[tuple[float, float]]) -> float:
    return sum(math.log(p / m) ** 2 for p, m in pairs if p > 0 and m > 0)


def fit_bandwidth_knee(raw: RawData, hw: Any) -> list[Fitted]:
    """Sustained ceiling B and knee exponent n of bw = (X^-n + B^-n)^(-1/n), by least squares in
    log time over the persistent-copy sweep (X set by the number of CTAs) and the large Triton copies."""
    import dataclasses

    from sim.calibrate.cases import Case, _graph, _triton_launch
    from sim.graph import Op, Tensor

    recs = [r for r in raw.records("copy", "copy_persistent") if not held_out(r)]
    recs += [r for r in raw.records("copy", "copy") if r.get("impl") == "triton_copy" and r["bytes"] >= 64 << 20
             and not held_out(r)]
    if len(recs) < 3:
        return []
    cases = []
    for r in recs:
        numel = int(r["numel"])
        t = [Tensor("x", (numel,), "bf16"), Tensor("y", (numel,), "bf16")]
        launch = _triton_launch(r, numel)
        op = Op(name="copy", kind="copy", reads=("x",), writes=("y",), launch=launch)
        cases.append(Case("copy", "fit", _graph([op], t), float(r["time_us"]), r))
    grid = [{"b": b, "n": n} for b in [3000 + 10 * i for i in range(301)] for n in [1.0 + 0.1 * j for j in range(41)]]

    def loss(c: dict[str, float]) -> float:
        h = dataclasses.replace(hw, hbm_sustained_bps=c["b"] * 1e9, bw_knee_exponent=c["n"])
        return _log_loss([(case.predicted_us(h), case.measured_us) for case in cases])

    # coarse to fine: first n on a few ceilings, then the full grid around the best
    coarse = _grid_search(grid[::7], loss)
    fine = [c for c in grid if abs(c["b"] - coarse["b"]) <= 100 and abs(c["n"] - coarse["n"]) <= 0.3]
    best = _grid_search(fine, loss)
    used = {record_id(r) for r in recs}
    f = raw.file_of("copy")
    return [
        Fitted("memory", "hbm_sustained_gbps", round(best["b"], 1), f,
               f"least squares (log time) over {len(recs)} persistent and large Triton copies, jointly with the knee", used),
        Fitted("memory", "bandwidth_knee_exponent", round(best["n"], 2), f,
               "least squares (log time) over the same copies, jointly with the sustained ceiling", used),
    ]


def _scale_fit(cases: list[Any], hw: Any, field_name: str, grid: list[float], scale: float = 1.0) -> float:
    import dataclasses

    def loss(c: dict[str, float]) -> float:
        h = dataclasses.replace(hw, **{field_name: c["v"] * scale})
        return _log_loss([(case.predicted_us(h), case.measured_us) for case in cases])

    return _grid_search([{"v": v} for v in grid], loss)["v"]


def fit_model_based(raw: RawData, hw: Any) -> list[Fitted]:
    """Fits that run the cost model on their training records: attention efficiencies, the
    transpose bandwidth factor, the misaligned-GEMM factor, PyTorch's broadcast indexing."""
    import dataclasses

    from sim.calibrate.cases import cases_from_raw

    groups = {g: list(raw.groups[g].records) for g in raw.groups}
    cases = [c for c in cases_from_raw(groups) if not held_out(c.record)]
    out: list[Fitted] = []
    effs = [0.05 + 0.005 * i for i in range(190)]
    fwd = [c for c in cases if c.record.get("bench") == "sdpa_fwd"]
    if fwd:
        v = _scale_fit(fwd, hw, "attention_fwd_eff", effs)
        hw = dataclasses.replace(hw, attention_fwd_eff=v)
        out.append(Fitted("efficiency", "attention_fwd", round(v, 4), raw.file_of("attention"),
                          f"least squares (log time) over {len(fwd)} flash forward shapes", {record_id(c.record) for c in fwd}))
    both = [c for c in cases if c.record.get("bench") == "sdpa_fwd_bwd"]
    if both:
        v = _scale_fit(both, hw, "attention_bwd_eff", effs)
        out.append(Fitted("efficiency", "attention_bwd", round(v, 4), raw.file_of("attention"),
                          f"least squares (log time) over {len(both)} flash forward+backward shapes (forward as fitted)",
                          {record_id(c.record) for c in both}))
    trans = [c for c in cases if c.record.get("bench") == "transpose_contiguous"]
    if trans:
        v = _scale_fit(trans, hw, "layout_bw_factor", [0.02 + 0.005 * i for i in range(197)])
        out.append(Fitted("efficiency", "layout_bandwidth_factor", round(v, 4), raw.file_of("layout"),
                          f"least squares (log time) over {len(trans)} transpose+contiguous sizes",
                          {record_id(c.record) for c in trans}))
    reds = [c for c in cases if c.family == "reduction_profiled"]
    if reds:
        v = _scale_fit(reds, hw, "reduction_step_s", [1e-9 * (2 + 2 * i) for i in range(150)])
        hw = dataclasses.replace(hw, reduction_step_s=v)
        out.append(Fitted("compute", "reduction_step_ns", round(v * 1e9, 1), raw.file_of("kernel_configs"),
                          f"least squares (log time) over {len(reds)} profiled reductions (layer norm, softmax, sums)",
                          {record_id(c.record) for c in reds}))
    mis = [c for c in cases if c.family == "gemm" and c.record.get("tag") == "misaligned"
           and not _gemm_aligned(c.record)]
    if mis:
        h0 = dataclasses.replace(hw, gemm_correction=())
        v = _scale_fit(mis, h0, "gemm_misaligned_factor", [0.02 + 0.01 * i for i in range(99)])
        out.append(Fitted("gemm", "misaligned_factor", round(v, 3), raw.file_of("gemm"),
                          f"least squares (log time) over {len(mis)} GEMMs whose N or K breaks 16-byte alignment",
                          {record_id(c.record) for c in mis}))
    decode = [c for c in cases if c.record.get("bench") == "sdpa_decode"]
    if decode:
        from sim.costmodel.attention import decode_model_s

        pts = []
        for c in decode:
            op = c.graph.ops[0]
            nbytes = sum(c.graph.tensors[t].nbytes for t in op.reads + op.writes)
            bh, kv = int(op.attrs["batch"]) * int(op.attrs["heads"]), int(op.attrs["seq_kv"])
            model_s, _, _ = decode_model_s(hw, nbytes, bh, kv)
            ratio = (c.measured_us * 1e-6 - hw.kernel_fixed_s) / (model_s - hw.kernel_fixed_s)
            pts.append({"x": [bh, kv], "ratio": round(max(ratio, 0.05), 4), "id": record_id(c.record)})
        out.append(Fitted("corrections", "attention_decode", {"points": pts}, raw.file_of("attention"),
                          f"measured / analytic decode time (less the fixed cost) at {len(pts)} training shapes, "
                          "dims [batch*heads, kv_len]", {p["id"] for p in pts}))
    bias = [c for c in cases if c.record.get("kernel") == "bias_add" and c.record.get("impl") == "torch_eager"]
    if bias:
        def loss(c: dict[str, float]) -> float:
            costs = dict(hw.op_costs)
            costs["broadcast_index"] = (0.0, 0.0, c["v"])
            h = dataclasses.replace(hw, op_costs=costs)
            return _log_loss([(case.predicted_us(h), case.measured_us) for case in bias])

        v = _grid_search([{"v": 0.5 * i} for i in range(200)], loss)["v"]
        out.append(Fitted("compute.op_costs", "broadcast_index", {"int": v, "fp32": 0.0, "sfu": 0.0},
                          raw.file_of("elementwise"),
                          f"least squares (log time) over {len(bias)} PyTorch broadcast bias adds (non-vectorized kernel)",
                          {record_id(c.record) for c in bias}))
    return out


def _gemm_aligned(rec: dict[str, Any]) -> bool:
    item = 4 if str(rec.get("dtype")) == "float32" else 2
    return (int(rec["k"]) * item) % 16 == 0 and (int(rec["n"]) * item) % 16 == 0


def fit_register_pressure(raw: RawData, hw: Any) -> list[Fitted]:
    """From the register sweep's training split: the resident warps per scheduler needed to hide
    latency (records without spills), then the bandwidth of spills that stay in L1."""
    import dataclasses

    from sim.calibrate.cases import cases_from_raw

    cases = [c for c in cases_from_raw({"register_sweep": list(raw.records("register_sweep"))})
             if not held_out(c.record)]
    clean = [c for c in cases if not c.record.get("n_spills")]
    spilled = [c for c in cases if c.record.get("n_spills") and int(c.record.get("n_regs", 0)) >= 128]
    out: list[Fitted] = []
    f = raw.file_of("register_sweep")
    if len(clean) >= 3:
        def loss_w(c: dict[str, float]) -> float:
            h = dataclasses.replace(hw, warps_to_hide_latency=c["w"])
            return _log_loss([(case.predicted_us(h), case.measured_us) for case in clean])

        best = _grid_search([{"w": 0.5 + 0.05 * i} for i in range(151)], loss_w)
        hw = dataclasses.replace(hw, warps_to_hide_latency=best["w"])
        out.append(Fitted("compute", "warps_to_hide_latency", round(best["w"], 2), f,
                          f"least squares (log time) over {len(clean)} register-sweep configs without spills",
                          {record_id(c.record) for c in clean}))
    if spilled:
        def loss_s(c: dict[str, float]) -> float:
            h = dataclasses.replace(hw, spill_bps=c["s"] * 1e9)
            return _log_loss([(case.predicted_us(h), case.measured_us) for case in spilled])

        best = _grid_search([{"s": 500.0 * (1.1 ** i)} for i in range(60)], loss_s)
        out.append(Fitted("memory", "spill_gbps", round(best["s"], 0), f,
                          f"least squares (log time) over {len(spilled)} spilling register-sweep configs"
                          " (spill bytes = 4 × Triton n_spills per thread, stored and loaded once)",
                          {record_id(c.record) for c in spilled}))
    return out


def fit_overheads(raw: RawData) -> list[Fitted]:
    """Host costs from the launch, eager-dispatch, compiled-call and graph-replay benchmarks."""
    out: list[Fitted] = []
    f = raw.file_of("kernel_overhead")
    disp = [r for r in raw.records("kernel_overhead", "eager_dispatch") if r.get("kernels_per_op") == 1]
    by_kind = {"gemm": ("mm_16x16",), "elementwise": ("add", "mul", "gelu", "add_")}
    for kind, names in by_kind.items():
        rs = [r for r in disp if r.get("op") in names]
        if rs:
            out.append(Fitted("host.eager_op_us_by_kind", kind, round(_median([r["host_us_per_op"] for r in rs]), 2), f,
                              f"median host time per eager {kind} op ({', '.join(r['op'] for r in rs)}), driver launch included",
                              {record_id(r) for r in rs}))
    nokernel = [r for r in raw.records("kernel_overhead", "eager_dispatch") if r.get("kernels_per_op") == 0]
    if nokernel:
        out.append(Fitted("host", "framework_op_us", round(_median([r["host_us_per_op"] for r in nokernel]), 2), f,
                          f"median host time of eager ops that launch no kernel ({', '.join(r['op'] for r in nokernel)})",
                          {record_id(r) for r in nokernel}))
    if disp:
        out.append(Fitted("host", "eager_op_us", round(_median([r["host_us_per_op"] for r in disp]), 2), f,
                          f"median host time per eager op launching one kernel, over {len(disp)} ops "
                          "(includes the driver launch, so host.launch_us is 0)", {record_id(r) for r in disp}))
        out.append(Fitted("host", "launch_us", 0.0, f, "included in eager_op_us (measured together)"))
    empty = [r for r in raw.records("kernel_overhead", "launch") if r.get("kernel") == "triton_empty"]
    if empty:
        r = empty[0]
        out.append(Fitted("host", "triton_launch_us", round(float(r["eager_host_enqueue_us"]), 2), f,
                          "host time per launch of an empty Triton kernel from Python", {record_id(r)}))
        out.append(Fitted("host", "graph_kernel_us", round(float(r["graph_device_us_per_kernel"]), 3), f,
                          "device time per empty Triton kernel replayed in a CUDA graph", {record_id(r)}))
    comp = sorted(raw.records("kernel_overhead", "compiled_call"), key=lambda r: r["kernels_per_call"])
    if len({r["kernels_per_call"] for r in comp}) >= 2:
        xs = [float(r["kernels_per_call"]) for r in comp]
        ys = [float(r["compiled_host_us_per_call"]) for r in comp]
        slope, icept = _linfit(xs, ys)
        out.append(Fitted("host", "compiled_call_us", round(max(icept, 0.0), 2), f,
                          f"intercept of host time per torch.compile call vs kernels per call ({len(comp)} chains)",
                          {record_id(r) for r in comp}))
        out.append(Fitted("host", "triton_launch_us", round(max(slope, 0.0), 2), f,
                          "slope of host time per torch.compile call vs kernels per call (launcher per kernel)",
                          {record_id(r) for r in comp}))
    elif comp:
        # Every chain compiled to one kernel: the call and its single launch cannot be separated.
        host = _median([float(r["compiled_host_us_per_call"]) for r in comp])
        triton = next((v.value for v in out if v.key == "triton_launch_us"), 0.0)
        assert isinstance(triton, float)
        out.append(Fitted("host", "compiled_call_us", round(max(host - triton, 0.0), 2), f,
                          f"median host time per torch.compile call with one kernel ({len(comp)} functions) "
                          "less one Triton launch", {record_id(r) for r in comp}))
    replay = raw.records("kernel_overhead", "graph_replay")
    if replay:
        host = _median([float(r["host_us_per_replay"]) for r in replay if "host_us_per_replay" in r] or [math.nan])
        if not math.isnan(host):
            out.append(Fitted("host", "graph_launch_us", round(host, 2), f,
                              f"median host time per CUDA graph replay call ({len(replay)} graphs)",
                              {record_id(r) for r in replay}))
    # The host_costs group (newer, more op kinds, explicit kernel counts) wins where both measure.
    out += fit_host_costs(raw)
    out += fit_profiler_overhead(raw)
    return out


PROFILER_EVENT_CATS = ("cpu_op", "cuda_runtime", "cuda_driver", "python_function")


def fit_profiler_overhead(raw: RawData) -> list[Fitted]:
    """Host time torch.profiler adds per recorded event, by configuration: the median over ops of
    (profiled - plain host time per call) / (events recorded per call). One constant per event is
    crude (a select op costs twice a view under record_shapes) but holds within about 2x per op and
    within 10 % over a realistic mix of ops (the block_forward and unbind records)."""
    recs = raw.records("profiler_overhead", "profiler_overhead")
    if not recs:
        return []
    f = raw.file_of("profiler_overhead")
    out: list[Fitted] = []
    for cfg in ("plain", "shapes", "stack"):
        rs = [r for r in recs if r.get("config") == cfg]
        ratios = []
        for r in rs:
            events = sum(float(r["events_per_call"].get(c, 0.0)) for c in PROFILER_EVENT_CATS)
            if events > 0:
                ratios.append(max(0.0, float(r["profiled_us_per_call"]) - float(r["plain_us_per_call"])) / events)
        if ratios:
            out.append(Fitted("host.profiler_event_us", cfg, round(_median(ratios), 3), f,
                              f"median over {len(ratios)} ops of (host time per call under the profiler - without) / "
                              "events recorded per call (CPU ops, runtime/driver calls, Python frames)",
                              {record_id(r) for r in rs}))
    return out


def fit_host_costs(raw: RawData) -> list[Fitted]:
    """Eager host cost per op kind, kernel-less framework ops, and autograd's backward costs from
    the host_costs group (tiny tensors, back-to-back calls)."""
    by_op: dict[str, list[float]] = {}
    for r in raw.records("host_costs", "eager_op"):
        by_op.setdefault(r["op"], []).append(float(r["host_us_per_op"]))
    if not by_op:
        return []
    recs = {op: _median(v) for op, v in by_op.items()}  # median over repeated runs
    f = raw.file_of("host_costs")
    ids = {record_id(r) for r in raw.records("host_costs", "eager_op")}
    out: list[Fitted] = []
    kinds = {"gemm": ("mm", "addmm_linear"), "elementwise": ("add_broadcast", "gelu", "native_dropout"),
             "reduction": ("sum_dim0", "layer_norm", "softmax"), "attention": ("sdpa",), "copy": ("index_copy_",)}
    for kind, names in kinds.items():
        vals = [recs[n] for n in names if n in recs]
        if vals:
            out.append(Fitted("host.eager_op_us_by_kind", kind, round(_median(vals), 2), f,
                              f"median host time per eager {kind} op ({', '.join(n for n in names if n in recs)}), "
                              "driver launch included", ids))
    structure: dict[str, list[float]] = {}
    for r in raw.records("host_costs", "structure_op"):
        structure.setdefault(r["op"], []).append(float(r["host_us_per_op"]))
    if "module_call" in structure and "python_call" in structure:
        mc = _median(structure["module_call"]) - _median(structure["python_call"])
        out.append(Fitted("host", "module_call_us", round(max(mc, 0.0), 2), f,
                          "host time of an nn.Module call less a plain Python call of its forward", ids))
    kernel_ops = [v for n, v in recs.items() if n not in ("t", "view", "transpose")]
    out.append(Fitted("host", "eager_op_us", round(_median(kernel_ops), 2), f,
                      f"median host time per eager op that launches one kernel ({len(kernel_ops)} ops)", ids))
    fw = [recs[n] for n in ("t", "view", "transpose") if n in recs]
    if fw:
        out.append(Fitted("host", "framework_op_us", round(_median(fw), 2), f,
                          "median host time of t / view / transpose (no kernel)", ids))
    chain_runs: dict[tuple[int, bool], list[float]] = {}
    for r in raw.records("host_costs", "autograd_chain"):
        chain_runs.setdefault((r["ops"], r["backward"]), []).append(float(r["host_us_per_call"]))
    chain = {k: _median(v) for k, v in chain_runs.items()}
    ns = sorted({n for n, _ in chain})
    if len(ns) >= 2 and all((n, b) in chain for n in ns for b in (False, True)) and "gelu" in recs:
        bwd = [chain[(n, True)] - chain[(n, False)] for n in ns]
        slope, icept = _linfit([float(n) for n in ns], bwd)
        node = max(slope - recs["gelu"], 0.0)
        out.append(Fitted("host", "autograd_node_us", round(node, 2), f,
                          "slope of backward host time over a chain of N GELUs (N = "
                          f"{', '.join(map(str, ns))}) less one eager gelu_backward dispatch", ids))
        bcall = max(icept, 0.0)
        out.append(Fitted("host", "backward_call_us", round(bcall, 2), f,
                          "intercept of the same fit: the fixed host cost of one .backward() call", ids))
        cc_recs = sorted(raw.records("host_costs", "compiled_chain"), key=lambda r: r["matmuls"])
        if len({r["matmuls"] for r in cc_recs}) >= 2:
            ks = [float(r["matmuls"]) for r in cc_recs]
            k_slope, call = _linfit(ks, [float(r["forward_host_us"]) for r in cc_recs])
            t_slope, t_icept = _linfit(ks, [float(r["train_step_host_us"]) for r in cc_recs])
            cids = {record_id(r) for r in cc_recs}
            out.append(Fitted("host", "compiled_call_us", round(max(call, 0.0), 2), f,
                              "intercept of torch.compile forward host time vs extern matmul kernels (k = "
                              f"{', '.join(str(int(k)) for k in ks)})", cids))
            out.append(Fitted("host", "compiled_kernel_us", round(max(k_slope, 0.0), 2), f,
                              "slope of the same fit: host cost per kernel the compiled wrapper launches", cids))
            # train step = forward call + backward graph call + .backward() + 2 autograd nodes (+ kernels)
            cbc = t_icept - call - bcall - 2 * node
            out.append(Fitted("host", "compiled_backward_call_us", round(max(cbc, 0.0), 2), f,
                              "intercept of compiled forward+backward host time vs k, less the forward call, "
                              ".backward() and two autograd nodes", cids))
        fns = [r for r in raw.records("host_costs", "autograd_function") if "host_us_per_step" in r]
        fn = fns[0] if fns else None
        triton = next((r for r in raw.records("kernel_overhead", "launch") if r.get("kernel") == "triton_empty"), None)
        if fn is not None and triton is not None:
            tl = float(triton["eager_host_enqueue_us"])
            fw_us = _median(fw) if fw else 0.0
            step_us = _median([float(r["host_us_per_step"]) for r in fns])
            pf = (step_us - 2 * tl - fw_us - bcall - 2 * node) / 2
            out.append(Fitted("host", "python_function_us", round(max(pf, 0.0), 2), f,
                              "(forward+backward host time of an autograd.Function launching one empty Triton kernel "
                              "each way, less two Triton launches, a view, .backward() and two nodes) / 2",
                              {record_id(fn), record_id(triton)}))
    return out


def _linfit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        return 0.0, my
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    return slope, my - slope * mx


def fit_unit_costs(raw: RawData, sm_count: int, lanes: dict[str, float]) -> tuple[list[Fitted], list[str]]:
    """Instructions per erf / random number from the compute-heavy kernels: the slope of time vs
    the number of calls per element (k = 4 → 16) cancels memory and fixed costs."""
    out: list[Fitted] = []
    notes: list[str] = []
    clock = _clock_hz(raw)
    recs = [r for r in raw.records("elementwise", "elementwise") if r.get("impl") == "triton"]
    f = raw.file_of("elementwise")
    for prefix, name, unit in (("erf_x", "erf", "fp32"), ("rand_x", "rng", "int"), ("fma_x", "fma", "fp32")):
        by_n: dict[int, dict[int, dict[str, Any]]] = {}
        for r in recs:
            kern = str(r.get("kernel", ""))
            if kern.startswith(prefix):
                by_n.setdefault(int(r["numel"]), {})[int(r["k"])] = r
        slopes = []
        used: set[str] = set()
        for numel, ks in by_n.items():
            if len(ks) < 2:
                continue
            lo, hi = min(ks), max(ks)
            dt = (ks[hi]["time_us"] - ks[lo]["time_us"]) * 1e-6
            if dt <= 0:
                continue
            cycles_per_call = dt * sm_count * clock / ((hi - lo) * numel)
            slopes.append(cycles_per_call)
            used |= {record_id(ks[lo]), record_id(ks[hi])}
        if not slopes:
            continue
        cyc = _median(slopes)
        instr = cyc * lanes[unit]
        if name == "fma":
            notes.append(f"fma: {cyc:.4f} SM-cycles per FMA per element ⇒ {1 / cyc:.0f} FMA lanes per SM "
                         f"(datasheet {lanes['fp32']:.0f})")
            continue
        other = {u: 0.0 for u in ("fp32", "sfu", "int") if u != unit}
        fit = (f"slope of time vs {name} calls per element (k={sorted(next(iter(by_n.values())))}) "
               f"× {lanes[unit]:.0f} {unit} lanes/SM at {clock / 1e6:.0f} MHz; all its work counted on {unit}")
        out.append(Fitted("compute.op_costs", name, {unit: round(instr, 2), **other}, f, fit, used))
        if name == "erf":
            out.append(Fitted("compute.op_costs", "gelu", {"fp32": round(instr + 3, 2), "sfu": 0.0, "int": 0.0}, f,
                              "0.5·x·(1+erf(x/√2)): the measured erf + 3 FP32 ops", used))
            out.append(Fitted("compute.op_costs", "gelu_backward", {"fp32": round(instr + 8, 2), "sfu": 1.0, "int": 0.0},
                              f, "the measured erf + exp(−x²/2) (one SFU op + 1 FP32) + 7 FP32 ops", used))
    return out, notes


def fit_registers(raw: RawData) -> list[Fitted]:
    """Registers per thread vs elements per thread of the fused bias+GELU+dropout kernel."""
    recs = [r for r in raw.records("register_sweep") if r.get("n_regs") and not r.get("n_spills")
            and r["n_regs"] < 255 and not held_out(r)]
    pts = {(float(r["elements_per_thread"]), float(r["n_regs"])) for r in recs}
    if len(pts) < 2:
        return []
    xs, ys = zip(*sorted(pts), strict=True)
    slope, icept = _linfit(list(xs), list(ys))
    f = raw.file_of("register_sweep")
    used = {record_id(r) for r in recs}
    return [
        Fitted("compute", "register_base_per_thread", round(max(icept, 1.0), 2), f,
               f"intercept of n_regs vs elements/thread, Triton bias+GELU+dropout ({len(pts)} configs without spills)", used),
        Fitted("compute", "registers_per_element", round(max(slope, 0.1), 3), f,
               "slope of n_regs vs elements/thread, same fit", used),
    ]


def fit_spill_words(raw: RawData, base_regs: float, per_elem: float, limit: float) -> list[Fitted]:
    """Spilled words per register the estimator puts past the limit (compiled kernels that spill)."""
    recs = [r for r in raw.records("register_sweep") if r.get("n_spills") and not held_out(r)]
    ratios = []
    for r in recs:
        excess = base_regs + per_elem * float(r["elements_per_thread"]) - limit
        if excess > 0:
            ratios.append(float(r["n_spills"]) / excess)
    if not ratios:
        return []
    return [Fitted("compute", "spill_words_per_excess_register", round(_median(ratios), 3), raw.file_of("register_sweep"),
                   f"median of Triton n_spills / (estimated registers − {limit:.0f}) over {len(ratios)} spilling configs",
                   {record_id(r) for r in recs})]


def fit_power(raw: RawData) -> list[Fitted]:
    """Steady-state SM clock under sustained tensor-core load (nvidia-smi samples after the first second)."""
    rec = next((r for r in raw.records("sustained") if str(r.get("load", "")).startswith("gemm_")), None)
    if rec is None:
        return []
    clocks = [float(p["sm_clock_mhz"]) for p in rec.get("smi", []) if float(p["t_s"]) >= 1.0]
    series = rec.get("series") or []
    if not clocks or len(series) < 3 or not rec.get("steady_us"):
        return []
    f = raw.file_of("sustained")
    meta_smi = raw.groups["sustained"].meta.get("nvidia_smi") or {}
    limit = meta_smi.get("power_limit_w")
    f_max = float(meta_smi.get("sm_clock_max_mhz") or 1980.0)
    first_us = float(series[0]["time_us"])  # the first back-to-back batch still runs at full clock
    slow = float(rec["steady_us"]) / first_us
    out = [Fitted("power", "sustained_clock_mhz", round(f_max / slow, 0), f,
                  f"effective clock: max clock {f_max:.0f} MHz / (steady GEMM time {rec['steady_us']:.0f} us over the "
                  f"first batch's {first_us:.0f} us) after seconds of back-to-back bf16 GEMMs under the power cap; "
                  f"nvidia-smi read a median {_median(clocks):.0f} MHz; a 1 GiB copy did not slow",
                  {record_id(rec)})]
    if limit:
        out.append(Fitted("power", "power_limit_w", float(limit), f, "nvidia-smi power.limit (read, never changed)",
                          {record_id(rec)}))
    return out


def fit_gemm(raw: RawData, peak_tflops: dict[str, float]) -> list[Fitted]:
    recs = [r for r in raw.records("gemm", "gemm") if not held_out(r) and str(r.get("dtype")) == "bfloat16"
            and not r.get("tf32")]
    big = [r for r in recs if min(r["m"], r["n"], r["k"]) >= 4096 and r["k"] % 8 == 0 and r["n"] % 8 == 0]
    if not big:
        return []
    effs = [2.0 * r["m"] * r["n"] * r["k"] / (kernel_time_us(r) * 1e-6) / (peak_tflops["bf16"] * 1e12) for r in big]
    f = raw.file_of("gemm")
    return [Fitted("gemm", "max_efficiency", round(max(effs), 4), f,
                   f"best bf16 tensor-core efficiency over {len(big)} GEMMs with m, n, k >= 4096",
                   {record_id(r) for r in big})]


def fit_gemm_correction(raw: RawData, hw_eval: Callable[[dict[str, Any]], tuple[float, float]]) -> list[dict[str, Any]]:
    """Measured / model ratio of the GEMM body (the time past the kernel's fixed cost) for the
    training split of GEMM shapes, after the scalar fits; the cost model scales the body by it."""
    pts = []
    for r in raw.records("gemm", "gemm"):
        if held_out(r):
            continue
        dt = "tf32" if r.get("tf32") else {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}.get(str(r["dtype"]))
        if dt is None:
            continue
        body_us, offset_us = hw_eval(r)
        if body_us <= 0:
            continue
        ratio = max((kernel_time_us(r) - offset_us) / body_us, 0.05)
        pts.append({"m": int(r["m"]), "n": int(r["n"]), "k": int(r["k"]), "dtype": dt,
                    "ratio": round(ratio, 4), "id": record_id(r)})
    return pts


def fit_all(raw: RawData, base: HardwareProfileFile) -> FitResult:
    sm_count = int(raw.meta.get("sm_count") or base.sm.count.value)
    lanes = {"fp32": base.compute.fp32_lanes_per_sm.value, "int": base.compute.int_lanes_per_sm.value,
             "sfu": base.compute.sfu_lanes_per_sm.value}
    values: list[Fitted] = []
    values += fit_copy(raw, sm_count)
    values += fit_overheads(raw)
    unit, notes = fit_unit_costs(raw, sm_count, lanes)
    values += unit
    regs = fit_registers(raw)
    values += regs
    if len(regs) == 2:
        values += fit_spill_words(raw, float(regs[0].value), float(regs[1].value),  # type: ignore[arg-type]
                                  base.sm.max_registers_per_thread.value)
    values += fit_gemm(raw, {d: q.value for d, q in base.compute.tensor_tflops.items()})
    values += fit_power(raw)
    # Later fits of the same key win (e.g. triton_launch_us from the compiled-call slope).
    dedup: dict[tuple[str, str], Fitted] = {}
    for v in values:
        dedup[(v.section, v.key)] = v
    return FitResult(values=list(dedup.values()), gemm_correction=[], notes=notes)


# -- writing the profile ---------------------------------------------------------------------


def _measured_line(value: Any, raw_file: str, fit: str, device: str, date: str, units: str | None = None) -> str:
    """A measured number in flow style: `{value: …}`, or `{fp32: …, sfu: …}` for op costs, or
    provenance alone when `value` is None and no units are given."""
    fit = fit.replace('"', "'")
    prov = f'source: measured, measured_on: "{device}", date: "{date}", raw: "{raw_file}", fit: "{fit}"'
    if units is not None:
        return f"{{{units}, {prov}}}"
    if value is None:
        return f"{{{prov}}}"
    return f"{{value: {value}, {prov}}}"


def _insert_after(text: str, pattern: str, addition: str, replace: bool = False) -> tuple[str, int]:
    """Put `addition` after the first match's group 1 (replacing the rest of the match when asked)."""

    def repl(m: re.Match[str]) -> str:
        return m.group(1) + addition if replace else m.group(0) + addition

    return re.subn(pattern, repl, text, count=1, flags=re.M)


def render_profile(base_text: str, name: str, result: FitResult, raw: RawData, raw_rel: str) -> str:
    """The base profile's text with fitted numbers replaced in place (comments and order kept)."""
    smi = raw.meta.get("nvidia_smi") or {}
    device = (f"{raw.meta.get('gpu_name', 'GPU')} ({raw.meta.get('sm_count', '?')} SMs, driver {smi.get('driver', '?')}, "
              f"torch {raw.meta.get('torch', '?')}, triton {raw.meta.get('triton', '?')})")
    date = str(raw.meta.get("date_utc", ""))[:10] or "unknown"
    text = base_text
    text = re.sub(r"^name: .*$", f"name: {name}", text, count=1, flags=re.M)
    text = re.sub(r"^description: .*$", f"description: Measured on {device}; unmeasured numbers keep their source.",
                  text, count=1, flags=re.M)
    tables = [f for f in result.values if f.section == "corrections"]
    power = [f for f in result.values if f.section == "power"]
    for f in result.values:
        if f.section in ("corrections", "power"):
            continue
        raw_file = f"{raw_rel}/{f.raw}" if f.raw else raw_rel
        if isinstance(f.value, dict):
            units = ", ".join(f"{u}: {v}" for u, v in f.value.items())
            # keep the other units of an op cost (e.g. sfu) from the base line
            m = re.search(rf"^(\s+{re.escape(f.key)}: )\{{(.*)\}}$", text, flags=re.M)
            if m:
                for unit, val in re.findall(r"(fp32|sfu|int): ([0-9.eE+-]+)", m.group(2)):
                    if unit not in f.value:
                        units += f", {unit}: {val}"
            line = _measured_line(None, raw_file, f.fit, device, date, units=units)
        else:
            line = _measured_line(f.value, raw_file, f.fit, device, date)
        if "." in f.section:  # an entry of a mapping (e.g. host.eager_op_us_by_kind.gemm)
            parent = f.section.split(".", 1)[1]
            indent = "    " if f.section.count(".") == 1 else "      "
            text, n = _insert_after(text, rf"^({indent}{re.escape(f.key)}: )\{{.*\}}$", line, replace=True)
            entry = f"{indent}{f.key}: {line}\n"
            if n == 0:
                text, n = _insert_after(text, rf"^(  {re.escape(parent)}:\n)", entry)
            if n == 0:
                text, n = _insert_after(text, rf"^({re.escape(f.section.split('.', 1)[0])}:\n)", f"  {parent}:\n{entry}")
        else:
            text, n = _insert_after(text, rf"^(\s+{re.escape(f.key)}: )\{{.*\}}$", line, replace=True)
        if n != 1:
            raise InputError(f"base profile has no key '{f.key}' to replace", path=f"{f.section}.{f.key}")
    if power:
        block = "power:\n"
        for f in power:
            block += f"  {f.key}: {_measured_line(f.value, f'{raw_rel}/{f.raw}', f.fit, device, date)}\n"
        text = re.sub(r"^power:\n(  .*\n)*", "", text, flags=re.M)
        text = text.rstrip("\n") + "\n" + block
    if tables:
        block = "corrections:\n"
        for f in tables:
            prov = _measured_line(None, f"{raw_rel}/{f.raw}", f.fit, device, date)
            assert isinstance(f.value, dict)
            pts = "\n".join(f"      - {{x: {p['x']}, ratio: {p['ratio']}}}" for p in f.value["points"])
            block += f"  {f.key}:\n    dims: [batch_heads, kv_len]\n    provenance: {prov}\n    points:\n{pts}\n"
        text = re.sub(r"^corrections:\n(  .*\n|    .*\n|      .*\n)*", "", text, flags=re.M)
        text = text.rstrip("\n") + "\n" + block
    if result.gemm_correction:
        rows = "\n".join(
            f"    - {{m: {p['m']}, n: {p['n']}, k: {p['k']}, dtype: {p['dtype']}, ratio: {p['ratio']}}}"
            for p in result.gemm_correction
        )
        prov = _measured_line(None, f"{raw_rel}/gemm.json",
                              "measured kernel time / analytic model, training split (held-out shapes excluded)",
                              device, date)
        block = (f"  correction_provenance: {prov}\n"
                 f"  correction:\n{rows}\n")
        text = re.sub(r"^(  misaligned_factor: .*\n)", lambda m: m.group(1) + block, text, count=1, flags=re.M)
    return text


def calibrate_from_raw(raw_dir: Path, base_profile: Path, out: Path, name: str) -> tuple[str, FitResult]:
    """Fit, write nothing; returns the profile text and the fit (the CLI writes atomically)."""
    from sim.hardware import Hardware

    raw = load_raw_checked(raw_dir)
    base = load_yaml_model(base_profile, HardwareProfileFile)
    result = fit_all(raw, base)
    raw_rel = _relative(raw_dir, out.parent)
    text = render_profile(base_profile.read_text(), name, result, raw, raw_rel)
    import yaml

    hw = Hardware.from_file(HardwareProfileFile.model_validate(yaml.safe_load(text)))
    # Stage 2: fits that run the cost model itself, on the profile with the stage-1 numbers.
    stage2 = fit_bandwidth_knee(raw, hw)
    result.values += stage2
    text = render_profile(base_profile.read_text(), name, result, raw, raw_rel)
    hw = Hardware.from_file(HardwareProfileFile.model_validate(yaml.safe_load(text)))
    result.values += fit_register_pressure(raw, hw)
    text = render_profile(base_profile.read_text(), name, result, raw, raw_rel)
    hw = Hardware.from_file(HardwareProfileFile.model_validate(yaml.safe_load(text)))
    result.values += fit_model_based(raw, hw)
    text = render_profile(base_profile.read_text(), name, result, raw, raw_rel)
    hw = Hardware.from_file(HardwareProfileFile.model_validate(yaml.safe_load(text)))
    result.gemm_correction = fit_gemm_correction(raw, model_us_for(hw))
    text = render_profile(base_profile.read_text(), name, result, raw, raw_rel)
    HardwareProfileFile.model_validate(yaml.safe_load(text))  # the written profile must load
    return text, result


def model_us_for(hw: Any) -> Callable[[dict[str, Any]], tuple[float, float]]:
    from sim.calibrate.cases import _gemm
    from sim.costmodel.gemm import gemm_terms

    def model_us(rec: dict[str, Any]) -> tuple[float, float]:
        """(analytic body, fixed part as the record measured it: profiler without the stream gap,
        events with their overhead), in µs."""
        case = _gemm(rec)
        op = case.graph.ops[0]
        t = gemm_terms(hw, int(op.attrs["m"]), int(op.attrs["n"]), int(op.attrs["k"]), 1, op.attrs["dtype"])
        edge = -hw.launch_gap_s if case.profiled else hw.event_overhead_s - hw.launch_gap_s
        return float(max(t["compute_s"], t["memory_s"]) * 1e6), float((hw.kernel_fixed_s + edge) * 1e6)

    return model_us


def load_raw_checked(raw_dir: Path) -> RawData:
    from sim.calibrate.raw import load_raw

    return load_raw(raw_dir)


def _relative(path: Path, start: Path) -> str:
    import os

    return os.path.relpath(path.resolve(), start.resolve())
