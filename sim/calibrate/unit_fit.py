"""Fits of the elementwise physics that run the cost model on their training records (no GPU).

- Triton threads' per-iteration instructions (`thread_instr`, spread over a thread's elements), on the
  register groups' issue-bound configs (>= 6 resident warps per scheduler, >= 2^25 elements, 1..16
  elements per thread); PyTorch's partial-vector term on the configs of 1..4 elements, without it;
- latency hiding: the resident warps per scheduler W for full issue and the sharpness n of the
  knee, jointly, on the register groups' configs without spills of 8+ elements per thread and >= 2^25
  elements (a compute-bound fused bias+GELU+dropout at 32..198 registers per thread, 1..16 warps);
- the random number's INT instructions on the rand_x kernels, priced by the model with their own
  registers (fit_rng); the knee and the random number are fitted twice round, each on the other's values;
- spills: the L1 rate of spills that fit there (the sweep's configs), then the off-chip ceiling and
  the bytes each thread keeps in flight when they overflow L1 (Little's law), on the spilling configs
  of the sweep and, where the raw folder has them, of the small grids (latency-bound: few threads
  per SM), which pin the in-flight bytes;
- math ops: each op's instructions per element from a Triton kernel that applies it K = 1, 4,
  16 times per element (`math_ops` group, records `bench: math_k`): the model, with the
  kernel's own launch config and its per-iteration extras (`acc = op(acc) + x`), is fitted to
  the three times, so the K slope sets the cost and memory-bound small K do not bias it.

Each returns `Fitted` values for sim.calibrate.fit to write; `fit_units` runs them in order,
each on the profile with the previous ones applied.
"""

from __future__ import annotations

import dataclasses
import statistics
from types import MappingProxyType
from typing import Any

from sim.calibrate.fit import Fitted, _grid_fit, _scaled
from sim.calibrate.raw import RawData, held_out, record_id, unsteady
from sim.hardware import Hardware

# The extra work of one iteration of math_k_kernel besides the op (sim/calibrate/gpu/triton_kernels.py):
# every iteration adds x; some ops' arguments are scaled or shifted to stay in range.
MATH_K_EXTRAS: dict[str, dict[str, float]] = {
    "sin": {"add": 1}, "cos": {"add": 1}, "tanh": {"add": 1}, "exp": {"mul": 1, "add": 1},
    "log": {"abs": 1, "add": 2}, "sqrt": {"abs": 1, "add": 1}, "rsqrt": {"abs": 1, "add": 2},
    "sigmoid": {"add": 1}, "silu": {"mul": 1, "add": 1}, "pow": {"abs": 1, "add": 2}, "erf": {"add": 1},
}
# erf keeps its fit from the elementwise group (the fused GELU's own kernel); math_k's erf is a cross-check.
MATH_FIT_SKIP = {"erf"}


# Groups of the register sweep's kernel (records `bench: register_sweep`): the sweep itself (4+ blocks per
# SM, 1-8 warps, many waves) and, where a raw folder has it, the same kernel on small grids (8-2048
# blocks: 1-2 blocks per SM or fewer) and with 16-warp blocks (sim.calibrate.gpu.register_small).
REGISTER_GROUPS = ("register_sweep", "register_small")
# NB: the L1 spill ceiling is fitted on the sweep alone: a per-SM rate the sweep's grids reach, and the small
# grids' L1-resident spills run faster than that share (a latency term the model lacks). The knee (W, n), the
# per-thread instructions and the partial-vector term read both groups (issue 18, gpu7): gpu6 found the knee
# pinned with the small grids (W 1.88, n 3) but off by default because the model over-priced the fused
# kernel by 5-9 % at full occupancy. That level came from the random number's cost: the rand_x K-slope
# counted rand_x16's lost latency hiding (128 registers) as Philox work (54.5 INT instructions where
# dropout-only and fused kernels imply 48-50; fit_rng refits it on the model), and from each Triton thread's
# per-iteration instructions (thread_instr / elements per thread, which the partial-vector term set to zero
# at 8+ elements). Measured (kernelsim validate, shipped profile): see the commit and docs/validation.md.
KNEE_GROUPS = REGISTER_GROUPS
L1_SPILL_GROUPS = ("register_sweep",)
# The configs whose time is the issue rate's: 2^25 elements and more (hundreds of waves; the fixed launch
# and the tail are under 1 %), which the per-thread instructions and the knee are fitted on.
ISSUE_BOUND_NUMEL = 1 << 25


def _register_cases(raw: RawData, groups: tuple[str, ...] = REGISTER_GROUPS) -> list[Any]:
    from sim.calibrate.cases import cases_from_raw

    records = [r for g in groups for r in raw.records(g, "register_sweep")]
    return [c for c in cases_from_raw({"register_sweep": records}) if not held_out(c.record)]


def _register_source(raw: RawData, groups: tuple[str, ...] = REGISTER_GROUPS) -> tuple[str, str]:
    """(the raw file a register fit's provenance names, the words its fit text adds): the sweep's file,
    and the small-grid file when the fit reads it too (one `raw` path per value)."""
    files = [raw.file_of(g) for g in groups if raw.records(g, "register_sweep")]
    return (files[0] if files else raw.file_of("register_sweep"),
            f" ({' and '.join(files)})" if len(files) > 1 else "")


def fit_latency_hiding(raw: RawData, hw: Hardware, groups: tuple[str, ...] = KNEE_GROUPS) -> list[Fitted]:
    """Over the register groups' training configs without spills (a compute-bound fused
    bias+GELU+dropout): first the instructions per partial-vector access (PyTorch's kernels' term, the
    model without thread_instr), on configs whose threads hold less than one 16-byte vector with 8 or
    more warps per scheduler; then, when the profile has `thread_instr`, a Triton thread's per-iteration
    instructions on the issue-bound configs (>= 6 warps per scheduler, >= 2^25 elements); then W and n
    of rate = (1 + (W/w)^n)^(-1/n), jointly, on the configs of whole vectors (8+ elements; with
    thread_instr, only those of >= 2^25 elements: the tails and fixed costs of smaller grids would bend it)."""
    from sim.costmodel.elementwise import resident_warps_per_sm
    from sim.hardware import occupancy

    clean = [c for c in _register_cases(raw, groups) if not c.record.get("n_spills")]

    def warps_per_scheduler(c: Any) -> float:
        launch = c.graph.ops[0].launch
        occ = occupancy(hw, launch.block, launch.regs_per_thread, launch.smem_per_block or 0, launch.grid)
        return resident_warps_per_sm(occ) / hw.schedulers_per_sm

    def ept(c: Any) -> float:
        return float(c.record.get("elements_per_thread") or 0)

    partial = [c for c in clean if ept(c) < 8 and warps_per_scheduler(c) >= 8]
    whole = [c for c in clean if ept(c) >= 8]
    issue_bound = [c for c in clean if warps_per_scheduler(c) >= 6 and int(c.record.get("numel") or 0) >= ISSUE_BOUND_NUMEL]
    f, files = _register_source(raw, groups)
    out: list[Fitted] = []
    if len(partial) >= 3:
        # PyTorch's kernels with part of a vector per thread keep this older term (the Triton terms below do
        # not apply to them): fitted as before, without the per-thread instructions and the pipe overlap.
        old = dataclasses.replace(hw, thread_instr=None)
        vfit = _grid_fit(partial, [{"v": 1.0 * i} for i in range(201)],
                         lambda c: dataclasses.replace(old, partial_vector_instr=c["v"]))
        v = vfit.best["v"]
        hw = dataclasses.replace(hw, partial_vector_instr=v)
        out.append(Fitted("compute", "partial_vector_instr", v, f,
                          f"least squares (log time) over {len(partial)} register-sweep configs{files} without spills whose"
                          " threads hold 1..4 bf16 elements, with >= 8 resident warps per scheduler (the model without"
                          " thread_instr, which only Triton kernels pay)",
                          {record_id(c.record) for c in partial}, spread=_scaled(vfit.spread["v"], 1.0, 1)))
    if hw.thread_instr is not None and len({ept(c) for c in issue_bound}) >= 3 and len(issue_bound) >= 6:
        # Per-thread instructions shrink as 1 / elements per thread: told apart from the per-element
        # costs by the configs' 1..16 elements per thread.
        cands = [{"t": 2.0 * i} for i in range(101)]
        tfit = _grid_fit(issue_bound, cands, lambda c: dataclasses.replace(hw, thread_instr=c["t"]))
        hw = dataclasses.replace(hw, thread_instr=tfit.best["t"])
        out.append(Fitted("compute", "thread_instr", tfit.best["t"], f,
                          f"least squares (log time) over {len(issue_bound)} register-sweep configs{files} without spills,"
                          f" with >= 6 resident warps per scheduler and >= {ISSUE_BOUND_NUMEL} elements (issue-bound: 1..16"
                          " elements per thread)", {record_id(c.record) for c in issue_bound},
                          spread=_scaled(tfit.spread["t"], 1.0, 1)))
    if any(o.key == "thread_instr" for o in out):
        # The knee is a throughput property: fitted where the issue rate sets the time (the small grids'
        # tails and fixed costs, which this model lacks, would bend it).
        whole = [c for c in whole if int(c.record.get("numel") or 0) >= ISSUE_BOUND_NUMEL]
    if len(whole) < 4:
        return out

    def hw_for(c: dict[str, float]) -> Hardware:
        return dataclasses.replace(hw, warps_to_hide_latency=c["w"], latency_hiding_exponent=c["n"])

    exponents = (1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0)
    coarse = _grid_fit(whole, [{"w": round(0.2 + 0.1 * i, 2), "n": n} for i in range(59) for n in exponents], hw_for).best
    fitted = _grid_fit(whole, [{"w": round(coarse["w"] + 0.02 * d, 2), "n": n} for d in range(-10, 11) for n in exponents
                               if coarse["w"] + 0.02 * d > 0], hw_for)
    best = fitted.best
    used = {record_id(c.record) for c in whole}
    big = f" over >= {ISSUE_BOUND_NUMEL} elements" if any(o.key == "thread_instr" for o in out) else ""
    out += [
        Fitted("compute", "warps_to_hide_latency", round(best["w"], 2), f,
               f"least squares (log time) over {len(whole)} register-sweep configs{files} without spills whose threads hold"
               f" 8 or more elements{big}, jointly with latency_hiding_exponent", used,
               spread=_scaled(fitted.spread["w"], 1.0, 2)),
        Fitted("compute", "latency_hiding_exponent", best["n"], f,
               "least squares (log time) over the same configs, jointly with warps_to_hide_latency", used,
               spread=_scaled(fitted.spread["n"], 1.0, 2)),
    ]
    return out


def _footprint_overflows(case: Any, hw: Hardware) -> bool:
    return bool(case.predict(hw)[0].detail.get("spill_offchip"))


def _offchip_traffic_ratio(cases: list[Any]) -> tuple[float, float, float, int] | None:
    """(median, min, max, configs) of the local loads + stores per 2 bytes of spill area over the distinct
    compiled configs of `cases` that carry their accesses (sim.calibrate.spill_traffic)."""
    by: dict[tuple[Any, ...], float] = {}
    for c in cases:
        op = next(o for o in c.graph.ops if o.launch is not None and o.launch.spill_bytes_per_thread)
        la = op.launch
        if la.spill_traffic_bytes_per_thread is None:
            continue
        r = c.record
        by[(r.get("kernel"), r.get("BLOCK"), r.get("num_warps"), r.get("n_regs"))] = (
            la.spill_traffic_bytes_per_thread / (2.0 * la.spill_bytes_per_thread))
    if not by:
        return None
    vals = sorted(by.values())
    return round(statistics.median(vals), 2), round(vals[0], 2), round(vals[-1], 2), len(vals)


def fit_spills(raw: RawData, hw: Hardware) -> list[Fitted]:
    """The L1 spill rate (the sweep's spilling configs whose spill footprint fits in L1: a per-SM
    ceiling, see L1_SPILL_GROUPS), then the off-chip ceiling and in-flight bytes per thread (every
    register group's configs that overflow it: the small grids' few threads per SM are latency-bound,
    which pins the bytes each keeps in flight)."""
    spilled = [c for c in _register_cases(raw) if c.record.get("n_spills")]
    if not spilled:
        return []
    counted = (" (spill traffic = the compiled kernel's local loads + stores per thread, ptxas -v:"
               " calibration/h200/spill_traffic)" if hw.spill_traffic_from_accesses else
               " (spill bytes = 4 × Triton n_spills per thread, stored and loaded once)")
    f, _ = _register_source(raw, L1_SPILL_GROUPS)
    out: list[Fitted] = []
    sweep = {record_id(c.record) for c in _register_cases(raw, L1_SPILL_GROUPS)}
    in_l1 = [c for c in spilled if not _footprint_overflows(c, hw) and record_id(c.record) in sweep]
    if in_l1:
        sfit = _grid_fit(in_l1, [{"s": 500.0 * (1.1 ** i)} for i in range(60)],
                         lambda c: dataclasses.replace(hw, spill_bps=c["s"] * 1e9))
        hw = dataclasses.replace(hw, spill_bps=sfit.best["s"] * 1e9)
        out.append(Fitted("memory", "spill_gbps", round(sfit.best["s"], 0), f,
                          f"least squares (log time) over {len(in_l1)} spilling register-sweep configs whose spills fit"
                          f" in L1{counted}",
                          {record_id(c.record) for c in in_l1}, spread=_scaled(sfit.spread["s"], 1.0, 0)))
    off = [c for c in spilled if _footprint_overflows(c, hw)]
    off_ids = {record_id(c.record) for c in off}
    f, files = _register_source(raw, tuple(g for g in REGISTER_GROUPS
                                           if off_ids & {record_id(c.record) for c in _register_cases(raw, (g,))}))
    ratio = _offchip_traffic_ratio(off) if hw.spill_traffic_from_accesses else None
    if ratio is not None:
        value, lo, hi, configs = ratio
        hw = dataclasses.replace(hw, spill_offchip_traffic_ratio=value)
        out.append(Fitted("memory", "spill_offchip_traffic_ratio", value, f,
                          f"median over the {configs} distinct configs (kernel, BLOCK, num_warps, registers) of the"
                          " register groups whose spills overflow L1 of their compiled local loads + stores per"
                          " thread / 2 × their local size (ptxas -v, calibration/h200/spill_traffic); spread:"
                          " their range", off_ids, spread=(lo, hi)))
    if len(off) >= 2:
        cands = [{"b": 100.0 * (1.1 ** i), "q": 2.0 * (1.15 ** j)} for i in range(45) for j in range(40)]
        ofit = _grid_fit(off, cands, lambda c: dataclasses.replace(hw, spill_offchip_bps=c["b"] * 1e9,
                                                                   spill_inflight_bytes_per_thread=c["q"]))
        best = ofit.best
        used = {record_id(c.record) for c in off}
        out.append(Fitted("memory", "spill_offchip_gbps", round(best["b"], 0), f,
                          f"least squares (log time) over {len(off)} register-sweep configs{files} whose spills overflow L1,"
                          f" jointly with spill_inflight_bytes_per_thread{counted if hw.spill_traffic_from_accesses else ''}",
                          used, spread=_scaled(ofit.spread["b"], 1.0, 0)))
        out.append(Fitted("memory", "spill_inflight_bytes_per_thread", round(best["q"], 1), f,
                          "least squares (log time) over the same configs, jointly with spill_offchip_gbps", used,
                          spread=_scaled(ofit.spread["q"], 1.0, 1)))
    return out


def math_k_case(rec: dict[str, Any], op_name: str) -> Any:
    """A math_k record as the one-op graph the model prices: `op` K times plus the iteration's extras."""
    from sim.calibrate.cases import Case, _graph, _triton_launch
    from sim.graph import Op, Tensor

    numel, k = int(rec["numel"]), int(rec["K"])
    math: dict[str, float] = {op_name: float(k)}
    for extra, count in MATH_K_EXTRAS.get(op_name, {"add": 1}).items():
        math[extra] = math.get(extra, 0.0) + count * k
    t = [Tensor("x", (numel,), "bf16"), Tensor("y", (numel,), "bf16")]
    op = Op(name=f"math_k_{op_name}", kind="elementwise", reads=("x",), writes=("y",),
            launch=_triton_launch(rec, numel), library="triton",
            attrs=MappingProxyType({"math": MappingProxyType(math), "numel": numel}))
    return Case("math_k", f"math_k {op_name} K={k}", _graph([op], t), float(rec["time_us"]), rec)


def fit_math_ops(raw: RawData, hw: Hardware) -> list[Fitted]:
    """Each math op's FP32-equivalent instructions per element from its K = 1, 4, 16 Triton kernels."""
    recs = [r for r in raw.records("math_ops", "math_k") if not unsteady(r)]
    by_op: dict[str, list[dict[str, Any]]] = {}
    for r in recs:
        by_op.setdefault(str(r["op"]), []).append(r)
    f = raw.file_of("math_ops")
    out: list[Fitted] = []
    for name, rs in sorted(by_op.items()):
        if name in MATH_FIT_SKIP or len({int(r["K"]) for r in rs}) < 2:
            continue
        cases = [math_k_case(r, name) for r in rs]

        def hw_for(c: dict[str, float], name: str = name) -> Hardware:
            return dataclasses.replace(hw, op_costs={**hw.op_costs, name: (c["v"], 0.0, 0.0)})

        coarse = _grid_fit(cases, [{"v": 1.0 * i} for i in range(801)], hw_for).best
        # fine grid ±25 % around the coarse fit: wide enough for the bootstrap interval
        fine = sorted({round(max(0.0, coarse["v"] * (1 + 0.005 * d)), 2) for d in range(-50, 51)})
        fitted = _grid_fit(cases, [{"v": v} for v in fine], hw_for)
        ks = sorted({int(r["K"]) for r in rs})
        out.append(Fitted("compute.op_costs", name, {"fp32": round(fitted.best["v"], 2), "sfu": 0.0, "int": 0.0}, f,
                          f"least squares (log time) over the Triton kernel applying it K={ks} times per element"
                          f" ({rs[0]['numel']} bf16 elements, fp32 math); FP32-equivalent instructions, all its units'"
                          " work counted on fp32", {record_id(r) for r in rs}, n=len(rs),  # ids ignore op and K
                          spread=_scaled(fitted.spread["v"], 1.0, 2)))
    return out


def fit_rng(raw: RawData, hw: Hardware) -> list[Fitted]:
    """The random number's INT instructions from the Triton kernels that call tl.rand K = 1, 4, 16 times
    per element (group `elementwise`, kernels rand_x*), priced by the model with each kernel's own
    registers: rand_x16 holds 128 registers per thread (4 warps per scheduler) where rand_x1 holds 32, so
    the plain slope of time vs K (fit_unit_costs) counts that kernel's lost latency hiding as random-number
    work — 54 instructions where kernels calling it once (dropout, the fused bias+GELU+dropout) imply 48-50."""
    from sim.calibrate.cases import cases_from_raw

    recs = [r for r in raw.records("elementwise", "elementwise")
            if r.get("impl", "triton") == "triton" and str(r.get("kernel", "")).startswith("rand_x")]
    cases = [c for c in cases_from_raw({"elementwise": recs}) if c.measured_us > 0 and not unsteady(c.record)]
    if len({int(c.record.get("k") or 0) for c in cases}) < 2:
        return []
    base = hw.op_costs["rng"]

    def hw_for(c: dict[str, float]) -> Hardware:
        return dataclasses.replace(hw, op_costs={**hw.op_costs, "rng": (base[0], base[1], c["v"])})

    fitted = _grid_fit(cases, [{"v": round(20.0 + 0.25 * i, 2)} for i in range(241)], hw_for)
    return [Fitted("compute.op_costs", "rng", {"int": fitted.best["v"], "fp32": base[0], "sfu": base[1]},
                   raw.file_of("elementwise"),
                   f"least squares (log time) over {len(cases)} Triton kernels calling tl.rand K="
                   f"{sorted({int(c.record.get('k') or 0) for c in cases})} times per element, priced by the model with"
                   " each kernel's registers (its latency hiding) and launch; all its work counted on int",
                   {record_id(c.record) for c in cases}, spread=_scaled(fitted.spread["v"], 1.0, 2))]


def fit_units(raw: RawData, hw: Hardware) -> list[Fitted]:
    """Every fit of this module, in order, each on the profile with the previous ones applied."""
    out: list[Fitted] = []
    # The knee and per-thread instructions are fitted on the fused kernel, whose Philox cost the rand_x
    # kernels fit on the model with that knee: twice round, each on the other's last values.
    for _ in range(2 if hw.thread_instr is not None else 1):
        lat = fit_latency_hiding(raw, hw)
        for v in lat:
            hw = dataclasses.replace(hw, **{v.key: float(v.value)})  # type: ignore[arg-type]
        rng = fit_rng(raw, hw) if hw.thread_instr is not None else []
        for v in rng:
            units = dict(v.value)  # type: ignore[arg-type]
            hw = dataclasses.replace(hw, op_costs={**hw.op_costs, "rng": (units["fp32"], units["sfu"], units["int"])})
    out += lat + rng
    spills = fit_spills(raw, hw)
    scale = {"spill_gbps": ("spill_bps", 1e9), "spill_offchip_gbps": ("spill_offchip_bps", 1e9),
             "spill_inflight_bytes_per_thread": ("spill_inflight_bytes_per_thread", 1.0),
             "spill_offchip_traffic_ratio": ("spill_offchip_traffic_ratio", 1.0)}
    for v in spills:
        attr, mult = scale[v.key]
        hw = dataclasses.replace(hw, **{attr: float(v.value) * mult})  # type: ignore[arg-type]
    out += spills
    # NB: the math ops price PyTorch's kernels too, which do not pay the Triton-only terms (per-thread
    # instructions, the busiest SM's rounds): fitted on the Triton K-sweep without them, as before (with
    # them, the K=1 intercept moves into each op's cost: held-out PyTorch math kernels 9.9 -> 11.9 %).
    out += fit_math_ops(raw, dataclasses.replace(hw, thread_instr=None))
    return out
