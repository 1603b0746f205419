"""A variant's graph for one bucket: its transforms applied, or for a `choose` variant the
fastest candidate path by simulation; and the GraphCache a run or sweep worker owns."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from sim.costmodel import KernelCost
from sim.costmodel.cache import CostCache, cost_signature
from sim.costmodel.pricing import price
from sim.errors import InputError
from sim.graph import Graph, Op
from sim.hardware import Hardware
from sim.metrics import StepMetrics
from sim.run.simulate import simulate_bucket
from sim.schema.scenario import ScenarioFile, Variant
from sim.trace import Trace
from sim.transforms import Context, apply_all, check_dataflow
from sim.workload import Workload

if TYPE_CHECKING:  # load_scenario applies every variant once (load -> variants at run time)
    from sim.run.load import Scenario


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
    spec = scn if isinstance(scn, ScenarioFile) else scn.spec
    file = "" if isinstance(scn, ScenarioFile) else scn.file
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
                params: dict[str, float], graphs: GraphCache | None = None) -> list[tuple[str, Graph]]:
    """A `choose` variant's candidate graphs: its paths, then the variants it chooses from (no profile needed)."""
    assert v.choose is not None
    candidates = [(name, _apply_path(scn, list(specs), f"variants[{v_index}].choose.paths.{name}", graph, params)[0])
                  for name, specs in v.choose.paths.items()]
    for other_index, other in choose_from(scn, v_index):
        if graphs is not None:  # the very graph the run simulates for that variant (its simulation is kept)
            candidates.append((other.name, graphs.plain_variant(scn, other, other_index, graph, params)[0]))
        else:
            candidates.append((other.name, variant_graph(scn, other, other_index, graph, params)[0]))
    if not candidates:
        raise InputError("no candidate: 'from: all' found no variant with 'transforms'", file=scn.file,
                         path=f"variants[{v_index}].choose", expected="other variants, or 'paths'")
    return candidates


# A bucket's simulations are kept for its other variants (GraphCache.simulate) up to this graph size: a
# shared graph is then simulated once, and a run of large graphs holds no more traces than before.
BUCKET_RUN_MAX_OPS = 20_000


class GraphCache:
    """Built graphs, owned by a run or a sweep worker: a bucket's graph by (workload, parameter
    values) and a variant's graph by (that graph, variant), so the hardware profiles of a run and
    the sweep points that differ only in their profile build and transform each graph once.

    Graphs are immutable and transforms pure, so a hit is the same graph the build would give.
    A `choose` variant depends on the profile (it simulates its candidates) and is not kept.
    Keys hold object ids; each entry keeps its objects alive, so an id is never reused while
    its entry exists. Errors are raised each time, never cached.

    Variants of one bucket that give the very same graph (a `dispatch` variant whose taken path is
    another variant's transforms, a transform that changes nothing) get one graph object
    (`_same_graph`), so its prices, simulation and metrics are computed once per profile and bucket.
    """

    def __init__(self, max_entries: int = 4096) -> None:
        self.max_entries = max_entries
        self._built: dict[tuple[Any, ...], tuple[Any, Any, Graph]] = {}
        self._variants: dict[tuple[int, int], tuple[Graph, Variant, tuple[Graph, str]]] = {}
        self._candidates: dict[tuple[int, int, int], tuple[Graph, Variant, Any, list[tuple[str, Graph]]]] = {}
        self._simulations: dict[tuple[Any, ...], tuple[Graph, Workload, Any]] = {}
        self._prices: dict[tuple[int, str], tuple[Graph, tuple[KernelCost | None, ...]]] = {}
        self._op_signatures: dict[int, tuple[Graph, list[tuple[Any, ...]]]] = {}
        # (base graph, variant graph) -> which of their ops `_micro` sums (GraphCache.micro_ops)
        self._micro_ops: dict[tuple[int, int], tuple[Graph, Graph, bytes, bytes, tuple[list[int], list[int]]]] = {}
        # base graph -> the distinct graphs its variants gave (the base first), for _same_graph
        self._derived: dict[int, tuple[Graph, list[Graph]]] = {}
        # The simulations of the current (workload, profile, parameters): a variant whose graph is an
        # earlier variant's (_same_graph) takes its simulation. Graph id -> (graph, simulation).
        self._bucket_key: tuple[Any, ...] | None = None
        self._bucket_runs: dict[int, tuple[Graph, Workload, tuple[Trace, StepMetrics, dict[str, Any] | None]]] = {}

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
        return self.plain_variant(scn, v, v_index, graph, params)

    def plain_variant(self, scn: Scenario, v: Variant, v_index: int, graph: Graph,
                      params: dict[str, float]) -> tuple[Graph, str]:
        """A variant with `transforms` (no profile needed), built once per (graph, variant)."""
        key = (id(graph), id(v))
        hit = self._variants.get(key)
        if hit is not None and hit[0] is graph and hit[1] is v:
            return hit[2]
        built, path = variant_graph(scn, v, v_index, graph, params)
        out = (self._same_graph(graph, built), path)
        self._room(self._variants)
        self._variants[key] = (graph, v, out)
        return out

    def _same_graph(self, base: Graph, graph: Graph) -> Graph:
        """`graph`, or the equal graph that `base` or another of its variants already gave.

        Equal means indistinguishable: equal fields (every field of the graph, its ops and tensors
        takes part in ==) and the same repr, so 1 and 1.0, or 0.0 and -0.0, never count as equal.
        Prices, simulations and metrics are pure functions of the graph, so sharing one object
        changes no result.
        """
        entry = self._derived.get(id(base))
        if entry is None or entry[0] is not base:
            self._room(self._derived)
            entry = self._derived[id(base)] = (base, [base])
        seen = entry[1]
        for other in seen:
            if other is graph or (other == graph and repr(other) == repr(graph)):
                return other
        seen.append(graph)
        return graph

    def candidates(self, scn: Scenario, v: Variant, v_index: int, graph: Graph,
                   params: dict[str, float]) -> list[tuple[str, Graph]]:
        """A `choose` variant's candidate graphs (they do not depend on the profile; `from` candidates
        depend on the scenario's other variants, so the scenario spec is part of the key)."""
        key = (id(graph), id(v), id(scn.spec))
        hit = self._candidates.get(key)
        if hit is not None and hit[0] is graph and hit[1] is v and hit[2] is scn.spec:
            return hit[3]
        out = _candidates(scn, v, v_index, graph, params, self)
        self._room(self._candidates)
        self._candidates[key] = (graph, v, scn.spec, out)
        return out

    def step_time(self, scn: Scenario, graph: Graph, hw: Hardware, params: dict[str, float],
                  cache: CostCache) -> float:
        """The step time of `graph` on `hw` on every rank of the workload (a `choose` variant's
        yardstick), simulated once per (graph, workload layout, profile)."""
        return self.simulate(scn, graph, self.price(graph, hw, cache), hw, params, cache)[1].time_s

    def price(self, graph: Graph, hw: Hardware, cache: CostCache) -> tuple[KernelCost | None, ...]:
        """price(graph, hw, cache=cache), once per (graph, profile): a `choose` variant prices the
        graphs the run priced already. The same tuple each time (costs are immutable)."""
        key = (id(graph), cache.hardware_key(hw))
        hit = self._prices.get(key)
        if hit is not None and hit[0] is graph:
            return hit[1]
        costs = price(graph, hw, cache=cache)
        self._room(self._prices)
        self._prices[key] = (graph, costs)
        return costs

    def simulate(self, scn: Scenario, graph: Graph, costs: tuple[KernelCost | None, ...], hw: Hardware,
                 params: dict[str, float], cache: CostCache) -> tuple[Trace, StepMetrics, dict[str, Any] | None]:
        """simulate_bucket, once per (graph, workload, profile, parameters): a `choose` variant's
        yardstick runs are the very simulations of the baseline and of the variants it picks from,
        and the path it picks is one of them. `costs` must be price(graph, hw, cache=cache) (they are
        a pure function of the key). Kept only for scenarios with a `choose` variant. A hit gives the same Trace and metrics objects (immutable) and
        its own copy of the `comm` block (results are edited in place later)."""
        workload = scn.workload
        key = (id(graph), id(workload), cache.hardware_key(hw), tuple(sorted(params.items())))
        hit = self._simulations.get(key)
        if hit is not None and hit[0] is graph and hit[1] is workload:
            trace, m, comm = hit[2]
            return trace, m, copy.deepcopy(comm)
        if any(v.choose is not None for v in scn.spec.variants):
            out = simulate_bucket(workload, graph, costs, hw, params, cache)
            self._room(self._simulations)
            self._simulations[key] = (graph, workload, out)
            return out[0], out[1], copy.deepcopy(out[2])
        # Else only variants of this bucket that share a graph (_same_graph) simulate it twice: the
        # bucket's simulations are kept until the next bucket (graphs up to BUCKET_RUN_MAX_OPS ops).
        bucket = key[1:]
        if bucket != self._bucket_key:
            self._bucket_key = bucket
            self._bucket_runs.clear()
        kept = self._bucket_runs.get(id(graph))
        if kept is not None and kept[0] is graph and kept[1] is workload:
            trace, m, comm = kept[2]
            return trace, m, copy.deepcopy(comm)
        out = simulate_bucket(workload, graph, costs, hw, params, cache)
        if len(graph.ops) <= BUCKET_RUN_MAX_OPS:
            self._bucket_runs[id(graph)] = (graph, workload, out)
            return out[0], out[1], copy.deepcopy(out[2])
        return out

    def micro_ops(self, base: Graph, base_costs: tuple[KernelCost | None, ...], var: Graph,
                  var_costs: tuple[KernelCost | None, ...], cache: CostCache | None = None) -> tuple[list[int], list[int]]:
        """The ops whose kernel times `_micro` sums, once per (baseline graph, variant graph) rather than
        per profile: the baseline's kernels the variant replaced and the variant's new kernels, as
        indices into the costs, in the order and with the duplicates `_micro`'s dicts by op signature
        give (a signature's first position, its last op). Which ops have a cost is part of the key.
        `cache`: the run's CostCache, whose memo of the graphs' signatures (filled by pricing) serves."""
        b_priced = bytes(c is not None for c in base_costs)
        v_priced = bytes(c is not None for c in var_costs)
        key = (id(base), id(var))
        hit = self._micro_ops.get(key)
        if hit is not None and hit[0] is base and hit[1] is var and hit[2] == b_priced and hit[3] == v_priced:
            return hit[4]
        b_sig, v_sig = self.op_signatures(base, cache), self.op_signatures(var, cache)
        if len(b_sig) != len(b_priced) or len(v_sig) != len(v_priced):
            raise ValueError("costs do not match their graph's ops")
        base_last = {s: i for i, s in enumerate(b_sig) if b_priced[i]}
        var_last = {s: i for i, s in enumerate(v_sig) if v_priced[i]}
        out = ([i for s, i in base_last.items() if s not in var_last], [i for s, i in var_last.items() if s not in base_last])
        self._room(self._micro_ops)
        self._micro_ops[key] = (base, var, b_priced, v_priced, out)
        return out

    def op_signatures(self, graph: Graph, cache: CostCache | None = None) -> list[tuple[Any, ...]]:
        """Each op's (cost key, name), as `_micro` compares them; with `cache`, the cost keys come from
        its memo of the graph's signatures (CostCache.op_signatures: what pricing computed already)."""
        hit = self._op_signatures.get(id(graph))
        if hit is not None and hit[0] is graph:
            return hit[1]
        if cache is None:
            sigs = [op_signature(o, graph) for o in graph.ops]
        else:
            sigs = [(sig, o.name) for sig, o in zip(cache.op_signatures(graph), graph.ops, strict=True)]
        self._room(self._op_signatures)
        self._op_signatures[id(graph)] = (graph, sigs)
        return sigs


def op_signature(op: Op, graph: Graph) -> tuple[Any, ...]:
    """An op's cost signature and name: how a variant's kernels are matched to the baseline's (micro gain)."""
    return (cost_signature(op, graph), op.name)
