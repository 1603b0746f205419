"""The contention benchmark and the DDP step of the two-GPU harness, replayed in the engine.

`sim.calibrate.gpu.comm` measures (stages contention, contention_grid): a load (a bf16 GEMM or a
copy) issued on one stream while all-reduces are issued on another, interleaved call by call by
one host thread per rank; each alone, then both at once; the slowdown of each stream's window.
`simulate_cell` builds the same program (the same calls in the same issue order, on 2 ranks) and
runs it three times through the engine (load alone, all-reduce alone, both), so a prediction
contains everything the engine models: host dispatch of each call (a torch.distributed call's
measured host cost), launch queues, the rendezvous, SM holding and HBM sharing.

`ddp_prediction` prices the harness's DDP step (stages ddp, ddp_grid) with the workload
`workloads/ddp_mlp_x2.yaml` generalised to `layers` blocks and DDP's bucket assignment, with and
without the gradient all-reduces (DDP's no_sync); exposed communication = the difference, as
measured.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from sim.costmodel import KernelCost
from sim.graph import Graph
from sim.hardware import Hardware
from sim.schema.workload import WorkloadFile
from sim.workload import Workload

MIB = 1 << 20
# The DDP workload host.ddp is fitted on and the engine's contention rule was chosen on (hidden, ffn,
# layers, bucket cap in MB, gradients as bucket views): "calibrated" in every run, the rest "unseen".
CALIBRATED_DDP = {(4096, 16384, 1, 25.0, False)}


@dataclass(frozen=True)
class CellPrediction:
    load_alone_us: float
    load_concurrent_us: float
    comm_alone_us: float
    comm_concurrent_us: float

    @property
    def load_slowdown(self) -> float:
        return self.load_concurrent_us / self.load_alone_us

    @property
    def comm_slowdown(self) -> float:
        return self.comm_concurrent_us / self.comm_alone_us


def load_ops(load: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(tensors, op template) of one harness load: {"m","n","k"} a bf16 GEMM, {"bytes"} a bf16 copy."""
    if "m" in load:
        m, n, k = int(load["m"]), int(load["n"]), int(load["k"])
        tensors = {"la": {"shape": [m, k], "dtype": "bf16"}, "lb": {"shape": [k, n], "dtype": "bf16"},
                   "lc": {"shape": [m, n], "dtype": "bf16"}}
        return tensors, {"kind": "gemm", "m": m, "n": n, "k": k, "reads": ["la", "lb"], "writes": ["lc"]}
    elems = int(load["bytes"]) // 2
    tensors = {"src": {"shape": [elems], "dtype": "bf16"}, "dst": {"shape": [elems], "dtype": "bf16"}}
    return tensors, {"kind": "copy", "reads": ["src"], "writes": ["dst"]}


def cell_workload(load: dict[str, Any] | None, ar_bytes: int, n_load: int, n_ar: int) -> Workload:
    """The harness's concurrent phase: call i issues all-reduce i (stream 1, if i < n_ar), then load
    call i (stream 0, if i < n_load). n_load = 0 or n_ar = 0 gives an alone phase."""
    tensors: dict[str, Any] = {"x": {"shape": [ar_bytes // 4], "dtype": "fp32"}}
    template: dict[str, Any] = {}
    if load is not None and n_load:
        extra, template = load_ops(load)
        tensors.update(extra)
    ops: list[dict[str, Any]] = []
    for i in range(max(n_ar, n_load)):
        if i < n_ar:
            ops.append({"name": f"ar{i}", "kind": "collective", "collective": "all_reduce", "group": "data",
                        "stream": 1, "bytes": ar_bytes, "reads": ["x"], "writes": ["x"]})
        if i < n_load:
            ops.append({"name": f"load{i}", **template})
    spec = WorkloadFile.model_validate({
        "schema": "kernelsim.workload/v1", "name": "comm_contention_cell", "kind": "training",
        "parameters": {"ranks": 2}, "distribution": {"buckets": [{"params": {}, "weight": 1}]},
        "parallel": {"ranks": "ranks", "data": "ranks"}, "tensors": tensors, "ops": ops})
    return Workload(spec=spec, file="<contention cell>")


def _anchored(costs: tuple[KernelCost | None, ...], graph: Graph, load_call_us: float | None,
              ar_call_us: float | None = None) -> tuple[KernelCost | None, ...]:
    """Costs with the load kernels scaled to the measured time of one call alone (their SM and HBM
    demands kept as shares: the bytes and blocks are the same, spread over the measured time) and,
    with `ar_call_us`, the all-reduces' transfer set so that one call alone takes that long."""
    out: list[KernelCost | None] = []
    for op, c in zip(graph.ops, costs, strict=True):
        if c is not None and load_call_us is not None and op.name.startswith("load"):
            f = load_call_us * 1e-6 / c.time_s
            c = dataclasses.replace(c, time_s=c.time_s * f, compute_s=c.compute_s * f, memory_s=c.memory_s * f,
                                    fixed_s=c.fixed_s * f, bw_demand=min(1.0, c.bw_demand / f))
        elif c is not None and ar_call_us is not None and op.kind == "collective" and "transfer_s" in c.detail:
            transfer = float(c.detail["transfer_s"])
            new = max(transfer + ar_call_us * 1e-6 - c.time_s, 0.0)
            if transfer > 0 and new > 0:
                f = new / transfer
                c = dataclasses.replace(c, time_s=c.time_s - transfer + new, memory_s=c.memory_s - transfer + new,
                                        bw_demand=min(1.0, c.bw_demand / f),
                                        detail=MappingProxyType({**c.detail, "transfer_s": new}))
        out.append(c)
    return tuple(out)


def _stream_spans_us(workload: Workload, hw: Hardware, load_call_us: float | None = None,
                     ar_call_us: float | None = None) -> dict[int, float]:
    """Rank 0's end of the last kernel per stream (us from the step's start: the harness's window
    starts with an event the host records before it issues the first call)."""
    from sim.costmodel.pricing import price
    from sim.ranks import rank_plan, simulate_parallel

    params = workload.params_for(workload.buckets()[0])
    graph = workload.build(params)
    plan = rank_plan(workload.spec.parallel, params, workload.file)
    assert plan is not None

    def priced(g: Graph, h: Hardware) -> tuple[KernelCost | None, ...]:
        return _anchored(price(g, h), g, load_call_us, ar_call_us)

    trace = simulate_parallel(graph, hw, plan, priced, workload.file)[0]
    ends: dict[int, float] = {}
    for iv in trace.kernels():
        stream = graph.ops[iv.op].stream
        ends[stream] = max(ends.get(stream, 0.0), iv.end_s * 1e6)
    return ends


PHASE_POINTS = (-1.0, -0.5, 0.0, 0.5, 1.0)  # load call times 1 + k * spread averaged by simulate_cell


def simulate_cell(hw: Hardware, load: dict[str, Any], ar_bytes: int, n_load: int, n_ar: int,
                  load_call_us: float | None = None, ar_call_us: float | None = None,
                  phase_spread: float = 0.0) -> CellPrediction:
    """The harness's three phases of one contention cell (load on both ranks) in the engine; with
    `load_call_us` / `ar_call_us`, a load call / an all-reduce alone takes the measured time (what
    is tested is then the contention, not the GEMM, copy or collective model).

    With `phase_spread` (a fraction: how much a load call's time varies on the device, e.g. the
    spread of the measured windows alone) and `load_call_us`, the cell is the mean of the engine's
    runs with the load call at 1 + k * phase_spread of its time, k in PHASE_POINTS. Why: when a
    load call and an all-reduce take about as long as each other, which one ends first decides
    whether each all-reduce starts beside the next load call or waits for a running one whole; a
    deterministic run locks into one of the two, the device alternates between them (the cell
    GEMM 4096x16384x4096 vs 256 MiB: +0.2 % at the measured time, +44 % with the GEMM 2 % faster,
    +33 % measured)."""
    factors = [1.0 + k * phase_spread for k in PHASE_POINTS] if phase_spread > 0 and load_call_us else [1.0]
    runs = []
    for f in factors:
        call = load_call_us * f if load_call_us is not None else None
        load_alone = _stream_spans_us(cell_workload(load, ar_bytes, n_load, 0), hw, call)[0]
        comm_alone = _stream_spans_us(cell_workload(None, ar_bytes, 0, n_ar), hw, None, ar_call_us)[1]
        both = _stream_spans_us(cell_workload(load, ar_bytes, n_load, n_ar), hw, call, ar_call_us)
        runs.append(CellPrediction(load_alone, both[0], comm_alone, both[1]))
    if len(runs) == 1:
        return runs[0]
    # the mean slowdowns, carried as times over the measured-time run's alone times
    ref = runs[len(runs) // 2]
    load_sd = sum(r.load_slowdown for r in runs) / len(runs)
    comm_sd = sum(r.comm_slowdown for r in runs) / len(runs)
    return CellPrediction(ref.load_alone_us, ref.load_alone_us * load_sd, ref.comm_alone_us, ref.comm_alone_us * comm_sd)


def cell_load(rec: dict[str, Any]) -> dict[str, Any] | None:
    """The load of a harness contention record as load_ops takes it (None: unknown load)."""
    shape = rec.get("load_shape")
    if shape:
        return dict(shape)
    name = str(rec.get("load", ""))
    if name == "gemm_8192_bf16":
        return {"m": 8192, "n": 8192, "k": 8192}
    if name == "copy_1GiB_bf16":
        return {"bytes": 1 << 30}
    return None


def ddp_buckets(param_bytes: list[tuple[str, int]], bucket_cap_mb: float, first_bucket_mb: float = 1.0) -> list[list[str]]:
    """DDP's bucket assignment (after its rebuild on the first step's gradient order): parameters
    in the order their gradients become ready; a bucket closes once its size reaches its limit
    (the first bucket's limit is 1 MiB, torch's _DEFAULT_FIRST_BUCKET_BYTES; then the cap, in MiB as
    DDP converts bucket_cap_mb)."""
    limits = [first_bucket_mb * MIB, bucket_cap_mb * MIB]
    out: list[list[str]] = []
    cur: list[str] = []
    size = 0
    for name, nbytes in param_bytes:
        cur.append(name)
        size += nbytes
        if size >= limits[min(len(out), 1)]:
            out.append(cur)
            cur, size = [], 0
    if cur:
        out.append(cur)
    return out


def ddp_workload(hidden: int, ffn: int, layers: int, bucket_cap_mb: float, tokens: int, *,
                 gradient_as_bucket_view: bool = False, sync: bool = True, ranks: int = 2) -> Workload:
    """The harness's DDP step on `ranks` ranks: `layers` blocks of Linear(H, F), GELU, Linear(F, H)
    in bf16, forward and backward on `tokens` tokens (the input needs no gradient). With `sync`,
    DDP's reducer: each gradient is copied into its bucket when it is ready (unless the gradients
    are the bucket's views), a bucket's all-reduce is issued on NCCL's stream once its last
    gradient is in, and when the backward ends the default stream waits for every bucket and the
    reduced buckets are copied back to the gradients. Without `sync`: DDP's no_sync(). DDP's own host
    work is priced from the profile's host.ddp: per step (both modes, shared over the model's kernel
    ops) and per gradient hook (sync, before the gradient's bucket copy)."""
    H, F, T = hidden, ffn, tokens
    tensors: dict[str, Any] = {"x": {"shape": [T, H], "dtype": "bf16"}}
    fwd: list[dict[str, Any]] = []
    for b in range(layers):
        inp = "x" if b == 0 else f"y{b - 1}"
        for name, shape in ((f"w1_{b}", [H, F]), (f"b1_{b}", [F]), (f"w2_{b}", [F, H]), (f"b2_{b}", [H]),
                            (f"h{b}", [T, F]), (f"a{b}", [T, F]), (f"y{b}", [T, H]), (f"gy{b}", [T, H]),
                            (f"ga{b}", [T, F]), (f"gh{b}", [T, F]), (f"gw1_{b}", [H, F]), (f"gb1_{b}", [F]),
                            (f"gw2_{b}", [F, H]), (f"gb2_{b}", [H])):
            tensors[name] = {"shape": shape, "dtype": "bf16"}
        fwd += [{"name": f"fc1_{b}", "kind": "gemm", "m": T, "n": F, "k": H, "reads": [inp, f"w1_{b}", f"b1_{b}"],
                 "writes": [f"h{b}"]},
                {"name": f"gelu_{b}", "kind": "elementwise", "reads": [f"h{b}"], "writes": [f"a{b}"], "math": {"gelu": 1}},
                {"name": f"fc2_{b}", "kind": "gemm", "m": T, "n": H, "k": F, "reads": [f"a{b}", f"w2_{b}", f"b2_{b}"],
                 "writes": [f"y{b}"]}]
    # parameters in the order their gradients become ready (the backward runs the blocks in reverse)
    ready = []
    for b in reversed(range(layers)):
        ready += [(f"b2_{b}", H * 2), (f"w2_{b}", F * H * 2), (f"b1_{b}", F * 2), (f"w1_{b}", H * F * 2)]
    buckets = ddp_buckets(ready, bucket_cap_mb) if sync else []
    last_of = {names[-1]: k for k, names in enumerate(buckets)}
    for p, _ in ready:
        tensors[f"bk_{p}"] = {"shape": tensors[p]["shape"], "dtype": "bf16"}

    def grad_ready(p: str) -> list[dict[str, Any]]:
        """DDP's hook on parameter p's gradient: copy into the bucket; the bucket's all-reduce when complete."""
        if not sync:
            return []
        ops: list[dict[str, Any]] = [{"name": f"ddp_hook_{p}", "kind": "host", "ddp_hooks": 1, "phase": "backward"}]
        if not gradient_as_bucket_view:
            ops.append({"name": f"bucket_in_{p}", "kind": "copy", "reads": [f"g{p}"], "writes": [f"bk_{p}"],
                        "phase": "backward"})
        if p in last_of:
            k = last_of[p]
            names = buckets[k]
            nbytes = sum(dict(ready)[q] for q in names)
            slices = [f"bk_{q}" for q in names] if not gradient_as_bucket_view else [f"g{q}" for q in names]
            ops.append({"name": f"bucket{k}_allreduce", "kind": "collective", "collective": "all_reduce",
                        "group": "data", "stream": 1, "bytes": nbytes, "reads": slices, "writes": slices,
                        "phase": "backward"})
        return ops

    bwd: list[dict[str, Any]] = [{"name": "backward_start", "kind": "host", "backward_calls": 1, "phase": "backward"}]
    for b in reversed(range(layers)):
        gout = "gy_out" if b == layers - 1 else f"gy{b}"
        if b == layers - 1:
            tensors["gy_out"] = {"shape": [T, H], "dtype": "bf16"}
        bwd += [{"name": f"fc2_dgrad_{b}", "kind": "gemm", "m": T, "n": F, "k": H, "layout": "nt",
                 "reads": [gout, f"w2_{b}"], "writes": [f"ga{b}"], "phase": "backward"},
                {"name": f"fc2_wgrad_{b}", "kind": "gemm", "m": F, "n": H, "k": T, "layout": "tn",
                 "reads": [f"a{b}", gout], "writes": [f"gw2_{b}"], "phase": "backward"},
                {"name": f"fc2_bias_grad_{b}", "kind": "reduction", "rows": T, "cols": H, "axis": "rows",
                 "reads": [gout], "writes": [f"gb2_{b}"], "math": {"add": 1}, "phase": "backward"},
                {"name": f"fc2_nodes_{b}", "kind": "host", "autograd_nodes": 3, "phase": "backward"}]
        bwd += grad_ready(f"b2_{b}") + grad_ready(f"w2_{b}")
        bwd.append({"name": f"gelu_bwd_{b}", "kind": "elementwise", "reads": [f"ga{b}", f"h{b}"], "writes": [f"gh{b}"],
                    "math": {"gelu_backward": 1, "mul": 1}, "phase": "backward"})
        if b > 0:
            bwd.append({"name": f"fc1_dgrad_{b}", "kind": "gemm", "m": T, "n": H, "k": F, "layout": "nt",
                        "reads": [f"gh{b}", f"w1_{b}"], "writes": [f"gy{b - 1}"], "phase": "backward"})
        bwd += [{"name": f"fc1_wgrad_{b}", "kind": "gemm", "m": H, "n": F, "k": T, "layout": "tn",
                 "reads": ["x" if b == 0 else f"y{b - 1}", f"gh{b}"], "writes": [f"gw1_{b}"], "phase": "backward"},
                {"name": f"fc1_bias_grad_{b}", "kind": "reduction", "rows": T, "cols": F, "axis": "rows",
                 "reads": [f"gh{b}"], "writes": [f"gb1_{b}"], "math": {"add": 1}, "phase": "backward"},
                {"name": f"fc1_nodes_{b}", "kind": "host", "autograd_nodes": 3, "phase": "backward"}]
        bwd += grad_ready(f"b1_{b}") + grad_ready(f"w1_{b}")
    if sync and not gradient_as_bucket_view:
        # finalize: per bucket, the default stream waits for its all-reduce, then copies it back
        for names in buckets:
            for q in names:
                bwd.append({"name": f"bucket_out_{q}", "kind": "copy", "reads": [f"bk_{q}"], "writes": [f"g{q}"],
                            "phase": "backward"})
    ops = _with_step_host(fwd + bwd)
    spec = WorkloadFile.model_validate({
        "schema": "kernelsim.workload/v1", "name": f"ddp_mlp{H}x{layers}_b{bucket_cap_mb:g}", "kind": "training",
        "parameters": {"ranks": ranks}, "distribution": {"buckets": [{"params": {}, "weight": 1}]},
        "parallel": {"ranks": "ranks", "data": "ranks"}, "tensors": tensors, "ops": ops})
    return Workload(spec=spec, file=f"<ddp {H}/{F} x{layers} bucket {bucket_cap_mb:g} MB>")


def _with_step_host(ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`ops` with DDP's per-step host work (host.ddp.forward_us: the DDP module's hooks and the step's
    Python, measured as a whole per step) shared equally after the model's own kernel ops, in both
    modes: the calibrated steps at 1024 tokens, host-bound, end about 50-150 us after their host
    returns, so that work runs beside the GPU's, not before it (put before the forward it would
    push every kernel back: 2029 us predicted vs 1280 measured for the no_sync step)."""
    def model_op(o: dict[str, Any]) -> bool:
        return o["kind"] not in ("host", "collective") and not o["name"].startswith(("bucket_in_", "bucket_out_"))

    n = sum(1 for o in ops if model_op(o))
    out: list[dict[str, Any]] = []
    for o in ops:
        out.append(o)
        if model_op(o):
            out.append({"name": f"ddp_step_share_{o['name']}", "kind": "host", "ddp_steps": 1 / n,
                        **({"phase": o["phase"]} if "phase" in o else {})})
    return out


def ddp_exposed_us(hw: Hardware, hidden: int, ffn: int, layers: int, bucket_cap_mb: float, tokens: int, *,
                   gradient_as_bucket_view: bool = False) -> tuple[float, float]:
    """(step with communication, step under no_sync) in us on rank 0 of 2: exposed = the difference."""
    out = []
    for sync in (True, False):
        wl = ddp_workload(hidden, ffn, layers, bucket_cap_mb, tokens, gradient_as_bucket_view=gradient_as_bucket_view,
                          sync=sync)
        out.append(_step_us(wl, hw))
    return out[0], out[1]


def _step_us(workload: Workload, hw: Hardware) -> float:
    from sim.costmodel.pricing import price
    from sim.ranks import rank_plan, simulate_parallel

    params = workload.params_for(workload.buckets()[0])
    graph = workload.build(params)
    plan = rank_plan(workload.spec.parallel, params, workload.file)
    assert plan is not None
    traces = simulate_parallel(graph, hw, plan, price, workload.file)
    return max(t.end_s for t in traces) * 1e6
