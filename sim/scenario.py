"""Scenarios: load a scenario, build each variant's graph per bucket, price it, simulate it, aggregate.

Results are plain data (dicts/lists of numbers and strings) in the `kernelsim.run/v1`
shape documented in docs/json.md; reports render them.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sim.bands import annotate_run, calibrated_kernel_share, correction_points, load_bands
from sim.comm.parallel import merge_ranks, rank_plan, simulate_parallel
from sim.costmodel import KernelCost, kernel_cost
from sim.engine import simulate
from sim.errors import InfeasibleError, InputError, KernelsimError
from sim.gcpause import paused_gc
from sim.graph import Graph, Op
from sim.hardware import Hardware, load_profile, sustained
from sim.report.metrics import TERMS, StepMetrics, comm_metrics, step_metrics
from sim.schema.loader import load_yaml_model
from sim.schema.scenario import ScenarioFile, Variant
from sim.schema.workload import Bucket
from sim.trace import Trace
from sim.transforms import Context, apply_all, check_dataflow
from sim.workload import Workload, flat_ops, load_workload

RUN_SCHEMA = "kernelsim.run/v1"


@dataclass(frozen=True)
class Scenario:
    spec: ScenarioFile
    file: str
    workload: Workload
    hardware: tuple[Hardware, ...]
    buckets: tuple[Bucket, ...]


def with_parameters(workload: Workload, values: Mapping[str, float]) -> Workload:
    """The workload with parameter defaults replaced or added (scenario knobs, sweep values)."""
    params = dict(workload.spec.parameters)
    params.update(values)
    return dataclasses.replace(workload, spec=workload.spec.model_copy(update={"parameters": params}))


def load_scenario(path: Path, hardware_override: list[str] | None = None) -> Scenario:
    spec = load_yaml_model(path, ScenarioFile)
    base = path.parent
    wl_path = Path(spec.workload)
    if not wl_path.is_absolute():
        wl_path = base / wl_path
    try:
        found = wl_path.is_file()
    except OSError:  # a name too long for the file system
        found = False
    if not found:
        raise InputError("workload file not found", file=str(path), path="workload", value=spec.workload,
                         expected="a path relative to the scenario file")
    workload = load_workload(wl_path)
    if spec.parameters:
        workload = with_parameters(workload, spec.parameters)
    if hardware_override:
        hws = tuple(load_profile(h, Path.cwd(), path="--hardware") for h in hardware_override)
    else:
        hws = tuple(load_profile(h, base, file=str(path), path=f"hardware[{i}]") for i, h in enumerate(spec.hardware))
    if spec.clock == "sustained":
        for hw in hws:
            if hw.sustained_clock_hz is None:
                raise InputError("this profile has no measured sustained clock (power.sustained_clock_mhz)",
                                 file=str(path), path="clock", value=hw.name,
                                 expected="clock: burst, or a profile calibrated with the sustained-load benchmark")
        hws = tuple(sustained(hw) for hw in hws)
    buckets = tuple(workload.buckets(spec.distribution))
    if spec.distribution is not None:
        declared = set(workload.spec.parameters)
        for i, b in enumerate(spec.distribution):
            unknown = set(b.params) - declared
            if unknown:
                raise InputError(
                    f"bucket sets parameter '{sorted(unknown)[0]}' that the workload does not declare",
                    file=str(path), path=f"distribution[{i}].params", expected="one of: " + ", ".join(sorted(declared)),
                )
    scn = Scenario(spec=spec, file=str(path), workload=workload, hardware=hws, buckets=buckets)
    check_math_names(scn)
    # Apply every variant to every bucket once, so transform errors surface before any output.
    for b in buckets:
        params = workload.params_for(b)
        graph = workload.build(params)
        for v_index, v in enumerate(spec.variants):
            variant_graph(scn, v, v_index, graph, params)
    return scn


def _transform_math(specs: list[Any], where: str) -> Iterator[tuple[str, str]]:
    """(math op name, key path) of every math op a transform list names (fuse, insert, nested dispatch)."""
    for i, spec in enumerate(specs):
        kind, args = spec.kind_and_args()
        at = f"{where}[{i}].{kind}"
        if kind == "fuse":
            for key in ("math", "recompute_math"):
                for name in getattr(args, key) or {}:
                    yield name, f"{at}.{key}.{name}"
        elif kind == "insert":
            for name in getattr(args.op, "math", {}):
                yield name, f"{at}.op.math.{name}"
        elif kind == "dispatch":
            yield from _transform_math(list(args.then), f"{at}.then")
            yield from _transform_math(list(args.else_), f"{at}.else")


def check_math_names(scn: Scenario) -> None:
    """Every math op the workload and the variants name has a cost in every hardware profile:
    an unknown one is an input error at its key path, never a free instruction."""
    wl = scn.workload
    named: list[tuple[str, str, str]] = []  # (name, file, key path)
    for op, where in flat_ops(wl.spec, wl.params_for(scn.buckets[0]), wl.file):
        named.extend((name, wl.file, f"{where}.math.{name}") for name in getattr(op, "math", {}))
    for i, v in enumerate(scn.spec.variants):
        named.extend((n, scn.file, p) for n, p in _transform_math(list(v.transforms), f"variants[{i}].transforms"))
        for pname, specs in (v.choose.paths.items() if v.choose else ()):
            named.extend((n, scn.file, p) for n, p in _transform_math(list(specs), f"variants[{i}].choose.paths.{pname}"))
    for hw in scn.hardware:
        for name, file, where in named:
            if name not in hw.op_costs:
                raise InputError(f"math op '{name}' has no cost in hardware profile '{hw.name}'", file=file,
                                 path=where, value=name, expected="one of the profile's compute.op_costs: "
                                 + ", ".join(sorted(hw.op_costs)))


def _apply_path(scn: Scenario, specs: list[Any], where: str, graph: Graph, params: dict[str, float]) -> tuple[Graph, str]:
    ctx = Context(scn.file, where, params)
    out = apply_all(graph, specs, ctx)
    check_dataflow(graph, out, Context(scn.file, where, params))
    return out, "+".join(ctx.paths_taken) if ctx.paths_taken else "variant"


def variant_graph(scn: Scenario, v: Variant, v_index: int, graph: Graph, params: dict[str, float],
                  hw: Hardware | None = None, cache: CostCache | None = None,
                  graphs: GraphCache | None = None) -> tuple[Graph, str]:
    """The variant's graph for one bucket and the path it took.

    A `choose` variant simulates each candidate path (needs `hw`) and keeps the fastest if
    it beats the baseline by the margin; without `hw` (load-time checks) it only checks
    that every path applies. With `graphs`, candidates and their step times are kept there.
    """
    if v.choose is None:
        return _apply_path(scn, list(v.transforms), f"variants[{v_index}].transforms", graph, params)
    if graphs is not None:
        candidates = graphs.candidates(scn, v, v_index, graph, params)
    else:
        candidates = _candidates(scn, v, v_index, graph, params)
    if hw is None:
        return candidates[0][1], candidates[0][0]
    assert v.choose is not None
    cache = cache if cache is not None else CostCache()

    def step_s(g: Graph) -> float:  # on every rank of a `parallel` workload: its collectives over the group
        if graphs is not None:
            return graphs.step_time(scn, g, hw, params, cache)
        return simulate_bucket(scn.workload, g, price(g, hw, cache=cache), hw, params, cache)[1].time_s

    base_t = step_s(graph)
    name, best, best_t = "fallback", graph, base_t
    for cand_name, cand in candidates:
        t = step_s(cand)
        if t < best_t and t <= base_t * (1.0 - v.choose.min_gain):
            name, best, best_t = cand_name, cand, t
    return best, name


def choose_from(scn: Scenario | ScenarioFile, v_index: int) -> list[tuple[int, Variant]]:
    """The other variants (index, variant) that variant `v_index`'s `choose.from` names, in scenario order."""
    spec = scn.spec if isinstance(scn, Scenario) else scn
    file = scn.file if isinstance(scn, Scenario) else ""
    choose = spec.variants[v_index].choose
    if choose is None or not choose.from_:
        return []
    index = {o.name: i for i, o in enumerate(spec.variants)}
    if choose.from_ == "all":
        return [(i, o) for i, o in enumerate(spec.variants) if o.choose is None]
    out = []
    for j, name in enumerate(choose.from_):
        where = f"variants[{v_index}].choose.from[{j}]"
        if name not in index or name == spec.variants[v_index].name:
            others = [o.name for o in spec.variants if o.choose is None]
            raise InputError("unknown variant", file=file, path=where, value=name,
                             expected="another variant of this scenario: " + ", ".join(others))
        other = spec.variants[index[name]]
        if other.choose is not None:
            raise InputError("a 'choose' variant cannot be a candidate of another", file=file, path=where,
                             value=name, expected="a variant with 'transforms'")
        out.append((index[name], other))
    return out


def inline_choose(spec: ScenarioFile) -> ScenarioFile:
    """The scenario with every `choose.from` turned into `paths` (the named variants' transforms), so a
    choose variant keeps its candidates when other variants are left out (a sweep's `variants`)."""
    variants = []
    for i, v in enumerate(spec.variants):
        if v.choose is not None and v.choose.from_:
            paths = dict(v.choose.paths)
            for _, other in choose_from(spec, i):
                paths.setdefault(other.name, list(other.transforms))
            v = v.model_copy(update={"choose": v.choose.model_copy(update={"paths": paths, "from_": []})})
        variants.append(v)
    return spec.model_copy(update={"variants": variants})


def _candidates(scn: Scenario, v: Variant, v_index: int, graph: Graph,
                params: dict[str, float]) -> list[tuple[str, Graph]]:
    """A `choose` variant's candidate graphs: its paths, then the variants it chooses from (no profile needed)."""
    assert v.choose is not None
    candidates = [(name, _apply_path(scn, list(specs), f"variants[{v_index}].choose.paths.{name}", graph, params)[0])
                  for name, specs in v.choose.paths.items()]
    for other_index, other in choose_from(scn, v_index):
        candidates.append((other.name, variant_graph(scn, other, other_index, graph, params)[0]))
    if not candidates:
        raise InputError("no candidate: 'from: all' found no variant with 'transforms'", file=scn.file,
                         path=f"variants[{v_index}].choose", expected="other variants, or 'paths'")
    return candidates


def _cost_key(op: Op, graph: Graph) -> tuple[Any, ...]:
    shapes = tuple((graph.tensors[t].shape, graph.tensors[t].dtype) for t in op.reads + op.writes)
    return (op.kind, tuple(sorted((k, str(v)) for k, v in op.attrs.items())), op.launch, shapes, op.library)


def cost_signature(op: Op, graph: Graph) -> tuple[Any, ...]:
    """Everything a cost function reads: kind, attributes, launch config, read and written shapes, library."""
    return (
        op.kind,
        tuple(sorted((k, str(v)) for k, v in op.attrs.items())),
        op.launch,
        tuple((graph.tensors[t].shape, graph.tensors[t].dtype) for t in op.reads),
        tuple((graph.tensors[t].shape, graph.tensors[t].dtype) for t in op.writes),
        op.library,
    )


class CostCache:
    """Kernel costs memoized by (hardware, cost_signature), owned by whoever runs: a scenario run, a
    sweep worker (shared by its points), a serving pricer. Never module-global.

    Costs are pure functions of (op signature, hardware): a step repeats the same layers and a
    sweep prices the same ops on the same profile over and over. The hardware part of the key is
    the profile's full repr (every number), so profiles that differ anywhere never share entries;
    it is computed once per Hardware object (kept alive here, so its id is never reused). Errors
    are raised each time, never cached.
    """

    def __init__(self, max_entries: int = 200_000) -> None:
        self.max_entries = max_entries
        self._costs: dict[tuple[str, tuple[Any, ...]], KernelCost] = {}
        self._hw_keys: dict[int, tuple[Hardware, str]] = {}
        # Per graph (held, so its id is not reused): op identity -> cost_signature, for a graph
        # priced on several profiles (a run's hardware list, sweep points sharing a GraphCache).
        self._signatures: dict[int, tuple[Graph, dict[tuple[Any, ...], tuple[Any, ...]]]] = {}

    def __len__(self) -> int:
        return len(self._costs)

    def hardware_key(self, hw: Hardware) -> str:
        entry = self._hw_keys.get(id(hw))
        if entry is None or entry[0] is not hw:
            if len(self._hw_keys) >= 256:
                self._hw_keys.clear()
            entry = self._hw_keys[id(hw)] = (hw, repr(hw))
        return entry[1]

    def signatures(self, graph: Graph) -> dict[tuple[Any, ...], tuple[Any, ...]]:
        """The memo of `graph`'s cost signatures by op identity (see price)."""
        hit = self._signatures.get(id(graph))
        if hit is None or hit[0] is not graph:
            if len(self._signatures) >= 1024:
                self._signatures.clear()
            hit = self._signatures[id(graph)] = (graph, {})
        return hit[1]

    def cost(self, op: Op, graph: Graph, hw: Hardware, signature: tuple[Any, ...] | None = None) -> KernelCost:
        """kernel_cost(op, graph, hw), computed once per (hardware, cost_signature)."""
        key = (self.hardware_key(hw), signature if signature is not None else cost_signature(op, graph))
        cost = self._costs.get(key)
        if cost is None:
            cost = kernel_cost(op, graph, hw)
            if len(self._costs) >= self.max_entries:
                self._costs.clear()
            self._costs[key] = cost
        return cost


class GraphCache:
    """Built graphs, owned by a run or a sweep worker: a bucket's graph by (workload, parameter
    values) and a variant's graph by (that graph, variant), so the hardware profiles of a run and
    the sweep points that differ only in their profile build and transform each graph once.

    Graphs are immutable and transforms pure, so a hit is the same graph the build would give.
    A `choose` variant depends on the profile (it simulates its candidates) and is not kept.
    Keys hold object ids; each entry keeps its objects alive, so an id is never reused while
    its entry exists. Errors are raised each time, never cached.
    """

    def __init__(self, max_entries: int = 4096) -> None:
        self.max_entries = max_entries
        self._built: dict[tuple[Any, ...], tuple[Any, Any, Graph]] = {}
        self._variants: dict[tuple[int, int], tuple[Graph, Variant, tuple[Graph, str]]] = {}
        self._candidates: dict[tuple[int, int, int], tuple[Graph, Variant, Any, list[tuple[str, Graph]]]] = {}
        self._step_times: dict[tuple[int, int, str], tuple[Graph, Any, float]] = {}
        self._op_signatures: dict[int, tuple[Graph, list[tuple[Any, ...]]]] = {}

    def _room(self, table: dict[Any, Any]) -> None:
        if len(table) >= self.max_entries:
            table.clear()

    def build(self, workload: Workload, params: dict[str, float]) -> Graph:
        spec = workload.spec
        key = (id(spec.ops), id(spec.tensors), spec.mode, spec.name, spec.kind,
               tuple(sorted((k, type(v).__name__, v) for k, v in params.items())))
        hit = self._built.get(key)
        if hit is not None and hit[0] is spec.ops and hit[1] is spec.tensors:
            return hit[2]
        graph = workload.build(params)
        self._room(self._built)
        self._built[key] = (spec.ops, spec.tensors, graph)
        return graph

    def variant(self, scn: Scenario, v: Variant, v_index: int, graph: Graph, params: dict[str, float],
                hw: Hardware, cache: CostCache) -> tuple[Graph, str]:
        if v.choose is not None:
            return variant_graph(scn, v, v_index, graph, params, hw, cache, self)
        key = (id(graph), id(v))
        hit = self._variants.get(key)
        if hit is not None and hit[0] is graph and hit[1] is v:
            return hit[2]
        out = variant_graph(scn, v, v_index, graph, params, hw, cache)
        self._room(self._variants)
        self._variants[key] = (graph, v, out)
        return out

    def candidates(self, scn: Scenario, v: Variant, v_index: int, graph: Graph,
                   params: dict[str, float]) -> list[tuple[str, Graph]]:
        """A `choose` variant's candidate graphs (they do not depend on the profile; `from` candidates
        depend on the scenario's other variants, so the scenario spec is part of the key)."""
        key = (id(graph), id(v), id(scn.spec))
        hit = self._candidates.get(key)
        if hit is not None and hit[0] is graph and hit[1] is v and hit[2] is scn.spec:
            return hit[3]
        out = _candidates(scn, v, v_index, graph, params)
        self._room(self._candidates)
        self._candidates[key] = (graph, v, scn.spec, out)
        return out

    def step_time(self, scn: Scenario, graph: Graph, hw: Hardware, params: dict[str, float],
                  cache: CostCache) -> float:
        """The step time of `graph` on `hw` on every rank of the workload (a `choose` variant's
        yardstick), simulated once per (graph, workload layout, profile)."""
        parallel = scn.workload.spec.parallel
        key = (id(graph), id(parallel), cache.hardware_key(hw))
        hit = self._step_times.get(key)
        if hit is not None and hit[0] is graph and hit[1] is parallel:
            return hit[2]
        t = simulate_bucket(scn.workload, graph, price(graph, hw, cache=cache), hw, params, cache)[1].time_s
        self._room(self._step_times)
        self._step_times[key] = (graph, parallel, t)
        return t

    def op_signatures(self, graph: Graph) -> list[tuple[Any, ...]]:
        """Each op's (cost key, name), as `_micro` compares them."""
        hit = self._op_signatures.get(id(graph))
        if hit is not None and hit[0] is graph:
            return hit[1]
        sigs = [_op_signature(o, graph) for o in graph.ops]
        self._room(self._op_signatures)
        self._op_signatures[id(graph)] = (graph, sigs)
        return sigs


_MEASURED_CATEGORY = {"gemm": "compute", "attention": "compute", "collective": "comm", "layout": "layout"}


def measured_cost(op: Op) -> KernelCost:
    """An imported kernel's cost from its trace measurement (attrs `measured_us`, `device_gap_us`).

    The measured duration already includes contention with concurrent kernels, so it
    demands no shared bandwidth or SMs; the stream's idle gap before an already-queued
    kernel is its fixed per-kernel cost.
    """
    gap_s = float(op.attrs.get("device_gap_us", 0.0)) * 1e-6
    busy_s = float(op.attrs["measured_us"]) * 1e-6
    category = _MEASURED_CATEGORY.get(str(op.attrs.get("family", op.kind)), "memory")
    return KernelCost(time_s=busy_s + gap_s, compute_s=0.0, memory_s=0.0, fixed_s=gap_s, limiter="measured",
                      category=category, hbm_bytes=0.0, bw_demand=0.0, sm_demand=0.0)


def price(graph: Graph, hw: Hardware, *, measured: bool = False,
          cache: CostCache | None = None) -> tuple[KernelCost | None, ...]:
    """Kernel costs for every op (None for host-only ops).

    With `measured`, ops that carry a trace measurement (`measured_us`) use it; ops marked
    `unpriced` (imported kernels whose shapes are unknown) always do. `cache` is the run's
    CostCache (a fresh one, for this graph only, without it).
    """
    with paused_gc():
        return _price(graph, hw, measured, cache if cache is not None else CostCache())


def _price(graph: Graph, hw: Hardware, measured: bool, cache: CostCache) -> tuple[KernelCost | None, ...]:
    # Ops copied from one repeat-block op share their attrs and launch objects (sim.workload), and
    # their tensors (renamed per iteration) have the same shapes: within this graph they have one
    # cost signature, computed once per group of such ops. A tensor is known here by the number
    # of its (shape, dtype) class; the ids are safe as keys: the graph keeps every op alive.
    classes: dict[tuple[tuple[int, ...], str], int] = {}
    shape_class = {name: classes.setdefault((t.shape, t.dtype), len(classes)) for name, t in graph.tensors.items()}
    same: dict[tuple[Any, ...], KernelCost] = {}
    signatures = cache.signatures(graph)
    costs: list[KernelCost | None] = []
    for op in graph.ops:
        if not op.is_kernel:
            costs.append(None)
            continue
        if "measured_us" in op.attrs and (measured or op.attrs.get("unpriced")):
            costs.append(measured_cost(op))
            continue
        ident = (op.kind, id(op.attrs), id(op.launch), tuple([shape_class[t] for t in op.reads]),
                 tuple([shape_class[t] for t in op.writes]), op.library)
        cost = same.get(ident)
        if cost is None:
            sig = signatures.get(ident)
            if sig is None:
                sig = signatures[ident] = cost_signature(op, graph)
            try:
                cost = same[ident] = cache.cost(op, graph, hw, sig)
            except InfeasibleError as exc:
                raise InfeasibleError(f"{_op_where(graph, op)} on {hw.name}: {exc}") from None
            except InputError as exc:
                if exc.file:
                    raise
                raise exc.within(file=graph.file or None, prefix=graph.op_paths.get(op.name, f"op '{op.name}'")) from None
            except KernelsimError as exc:  # a pricing error (uncosted op, bad dimensions): located in the file
                raise type(exc)(f"{_op_where(graph, op)} on {hw.name}: {exc}") from None
        costs.append(cost)
    return tuple(costs)


def _op_where(graph: Graph, op: Op) -> str:
    """`FILE: ops[3] (op 'fc1')`, or as much of it as is known (ops made by a transform have no key path)."""
    path = graph.op_paths.get(op.name)
    where = f"{path} (op '{op.name}')" if path else f"op '{op.name}'"
    return f"{graph.file}: {where}" if graph.file else where


def run_graph(graph: Graph, hw: Hardware, cache: CostCache | None = None) -> tuple[Trace, StepMetrics]:
    trace = simulate(graph, price(graph, hw, cache=cache), hw)
    return trace, step_metrics(trace)


def _op_signature(op: Op, graph: Graph) -> tuple[Any, ...]:
    return (_cost_key(op, graph), op.name)


def _micro(base: Graph, base_costs: tuple[KernelCost | None, ...], var: Graph,
           var_costs: tuple[KernelCost | None, ...], graphs: GraphCache | None = None) -> tuple[float, float]:
    """Kernel time of what the variant changed: (baseline kernels replaced, variant kernels new)."""
    if graphs is not None:
        b_sig, v_sig = graphs.op_signatures(base), graphs.op_signatures(var)
    else:
        b_sig = [_op_signature(o, base) for o in base.ops]
        v_sig = [_op_signature(o, var) for o in var.ops]
    base_sigs = {s: c for s, c in zip(b_sig, base_costs, strict=True) if c is not None}
    var_sigs = {s: c for s, c in zip(v_sig, var_costs, strict=True) if c is not None}
    replaced = sum(c.time_s for s, c in base_sigs.items() if s not in var_sigs)
    new = sum(c.time_s for s, c in var_sigs.items() if s not in base_sigs)
    return replaced, new


def _bucket_result(b: Bucket, params: dict[str, float], m: StepMetrics, path: str) -> dict[str, Any]:
    return {
        "name": b.name or ",".join(f"{k}={_fmt(v)}" for k, v in b.params.items()),
        "params": {k: params[k] for k in sorted(params)},
        "weight": b.weight,
        "time_us": m.time_s * 1e6,
        "breakdown_us": {t: m.breakdown_s[t] * 1e6 for t in TERMS},
        "dominant": m.dominant,
        "kernels": m.kernels,
        "kernel_time_us": m.kernel_time_s * 1e6,
        "host_busy_us": m.host_busy_s * 1e6,
        "host_share": m.host_share,
        "hbm_bytes": m.hbm_bytes,
        "path": path,
    }


def simulate_bucket(workload: Workload, graph: Graph, costs: tuple[KernelCost | None, ...], hw: Hardware,
                    params: dict[str, float], cache: CostCache | None = None,
                    ) -> tuple[Trace, StepMetrics, dict[str, Any] | None]:
    """One bucket's step: on one rank, or on every rank of the workload's `parallel` layout.

    Several ranks give the critical (slowest) rank's metrics, a merged trace (tracks
    'rank R · …') and the `comm` JSON block; one rank gives `comm` only when the graph has
    collectives.
    """
    plan = rank_plan(workload.spec.parallel, params, workload.file)
    if plan is None or plan.ranks == 1:
        trace = simulate(graph, costs, hw)
        has_comm = any(o.kind == "collective" for o in graph.ops)
        return trace, step_metrics(trace), comm_result([trace], 0) if has_comm else None
    rank_traces = simulate_parallel(graph, hw, plan, functools.partial(price, cache=cache), workload.file)
    critical = max(range(len(rank_traces)), key=lambda r: (rank_traces[r].end_s, -r))
    return merge_ranks(rank_traces), step_metrics(rank_traces[critical]), comm_result(rank_traces, critical)


def comm_result(rank_traces: list[Trace], critical: int) -> dict[str, Any]:
    """The `comm` block of a bucket (docs/json.md): the critical rank's exposed communication, per collective."""
    cm = comm_metrics(rank_traces[critical])
    every = [comm_metrics(t) for t in rank_traces]
    return {
        "ranks": len(rank_traces),
        "critical_rank": critical,
        "rank_time_us": [t.end_s * 1e6 for t in rank_traces],
        "comm_time_us": cm.comm_s * 1e6,
        "exposed_comm_us": cm.exposed_s * 1e6,
        "hidden_comm_us": cm.hidden_s * 1e6,
        "rendezvous_wait_us": cm.wait_s * 1e6,
        "max_exposed_comm_us": max(c.exposed_s for c in every) * 1e6,
        "collectives": [
            {"name": c.name, "collective": c.collective, "bytes": c.bytes, "time_us": (c.end_s - c.start_s) * 1e6,
             "exposed_us": c.exposed_s * 1e6, "wait_us": c.wait_s * 1e6,
             **{k: c.args[k] for k in ("algorithm", "protocol", "channels", "ranks", "nodes", "busbw_gbps")
                if c.args.get(k) is not None}}
            for c in cm.collectives
        ],
    }


def _fmt(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else f"{v:g}"


def run_scenario(scn: Scenario, *, keep_traces: bool = False, cache: CostCache | None = None,
                 graphs: GraphCache | None = None) -> tuple[dict[str, Any], dict[tuple[str, str, int], Trace]]:
    """Simulate every (hardware, variant, bucket); returns the JSON-ready result and, on request, traces.

    `cache` holds kernel costs and `graphs` built graphs for this run (pass them to share them
    between runs, as a sweep worker does).
    """
    cache = cache if cache is not None else CostCache()
    graphs = graphs if graphs is not None else GraphCache()
    traces: dict[tuple[str, str, int], Trace] = {}
    total_w = sum(b.weight for b in scn.buckets)
    hw_results = []
    variants = [Variant(name="baseline", description="the workload as written")] + list(scn.spec.variants)
    for hw in scn.hardware:
        points = correction_points(hw)  # which kernels sit on calibrated points (error bands)
        per_variant: dict[str, list[dict[str, Any]]] = {v.name: [] for v in variants}
        micro: dict[str, list[tuple[float, float, float]]] = {v.name: [] for v in variants}
        for bi, b in enumerate(scn.buckets):
            params = scn.workload.params_for(b)
            base_graph = graphs.build(scn.workload, params)
            base_costs = price(base_graph, hw, cache=cache)
            base_trace: Trace | None = None
            for vi, v in enumerate(variants):
                if vi == 0:
                    graph, path, costs = base_graph, "baseline", base_costs
                else:
                    graph, path = graphs.variant(scn, v, vi - 1, base_graph, params, hw, cache)
                    costs = price(graph, hw, cache=cache)
                trace, m, comm = simulate_bucket(scn.workload, graph, costs, hw, params, cache)
                if keep_traces:
                    traces[(hw.name, v.name, bi)] = trace
                per_variant[v.name].append(_bucket_result(b, params, m, path))
                per_variant[v.name][-1]["shapes"] = "calibrated" if calibrated_kernel_share(graph, costs, points) > 0 else "unseen"
                if comm is not None:
                    per_variant[v.name][-1]["comm"] = comm
                # The simulated (first) rank's graph and costs: on several ranks its collectives are priced
                # over the real group, where `costs` priced them as one-rank calls (only the launch).
                base_trace = base_trace or trace
                rep, new = _micro(base_trace.graph, base_trace.costs, trace.graph, trace.costs, graphs)
                micro[v.name].append((b.weight, rep, new))
        base_buckets = per_variant["baseline"]
        base_w = sum(bk["time_us"] * bk["weight"] for bk in base_buckets) / total_w
        out_variants = []
        for v in variants:
            bks = per_variant[v.name]
            for bk, bb in zip(bks, base_buckets, strict=True):
                bk["gain_vs_baseline"] = 1.0 - bk["time_us"] / bb["time_us"]
            weighted = sum(bk["time_us"] * bk["weight"] for bk in bks) / total_w
            fallback = sum(bk["weight"] for bk in bks if "fallback" in bk["path"].split("+")) / total_w
            covered = 0.0 if v.name == "baseline" else sum(
                bk["weight"] for bk in bks if "fallback" not in bk["path"].split("+")) / total_w
            rep_w = sum(w * r for w, r, _ in micro[v.name]) / total_w
            new_w = sum(w * n for w, _, n in micro[v.name]) / total_w
            worst = min(bks, key=lambda bk: bk["gain_vs_baseline"])
            out_variants.append(
                {
                    "name": v.name,
                    "description": v.description,
                    "weighted_time_us": weighted,
                    "gain_vs_baseline": 1.0 - weighted / base_w,
                    "coverage": covered,
                    "fallback_rate": fallback,
                    "micro": {
                        "replaced_kernel_time_us": rep_w * 1e6,
                        "new_kernel_time_us": new_w * 1e6,
                        "gain": (1.0 - new_w / rep_w) if rep_w > 0 else None,
                    },
                    "tail": {
                        "worst_bucket": worst["name"],
                        "worst_gain": worst["gain_vs_baseline"],
                        "p90_time_us": _weighted_quantile([(bk["time_us"], bk["weight"]) for bk in bks], 0.9),
                    },
                    "buckets": bks,
                }
            )
        hw_results.append(
            {"name": hw.name, "gpu": hw.gpu, "profile": hw.source_file, "measured": hw.measured, "variants": out_variants}
        )
    result = {
        "schema": RUN_SCHEMA,
        "scenario": scn.spec.name,
        "workload": scn.workload.name,
        "min_gain": scn.spec.min_gain,
        "hardware": hw_results,
    }
    annotate_run(result, load_bands())  # error bands from validation (sim.bands)
    return result, traces


def _weighted_quantile(values: list[tuple[float, float]], q: float) -> float:
    vals = sorted(values)
    total = sum(w for _, w in vals)
    acc = 0.0
    for v, w in vals:
        acc += w
        if acc >= q * total - 1e-12:
            return v
    return vals[-1][0]


__all__ = ["CostCache", "GraphCache", "KernelsimError", "Scenario", "load_scenario", "price", "run_graph", "run_scenario"]
