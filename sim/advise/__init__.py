"""`kernelsim advise`: the seed's four decisions per variant and hardware, with the figures behind them.

For each hardware profile: where the baseline's time goes (breakdown, dominant term, hot
kernels with limiter, roofline headroom and critical-path slack); per variant a decision
(fuse / specialize / dispatch by bucket / use or keep the library / don't write) with its
reasons (sim.advise.rules); the recommended plan's acceptance criteria and dispatch table.
The result is plain data in schema `kernelsim.advice/v1` (docs/advise.md).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from sim.advise.critical import exposed_times
from sim.advise.kernels import SLACK_TARGETS, family_name, roofline, simulated_gain, speedup_needed
from sim.advise.plan import acceptance, dispatch_table
from sim.advise.rules import POSITIVE, Decision, VariantFigures, decide, primary_kind
from sim.costmodel import KernelCost
from sim.costmodel.cache import cost_signature
from sim.errors import InputError
from sim.graph import Graph, Op
from sim.hardware import Hardware
from sim.metrics import TERMS
from sim.run import Scenario, load_scenario, run_scenario
from sim.schema.scenario import AdviceSettings
from sim.schema.workload import Bucket
from sim.trace import Trace
from sim.validate.bands import straddles_zero

ADVICE_SCHEMA = "kernelsim.advice/v1"
HOT_KERNELS = 8  # kernels listed per hardware
SLACK_CHECKED = 5  # of those, how many get their Amdahl answer checked by simulation


def advise(scenario_path: str | Path, hardware: list[str] | None = None) -> dict[str, Any]:
    """Load a scenario, simulate it, and return the advice (schema kernelsim.advice/v1)."""
    scn = load_scenario(Path(scenario_path), hardware or None)
    return advise_scenario(scn)


def _key(params: Mapping[str, float]) -> tuple[tuple[str, float], ...]:
    return tuple(sorted((k, float(v)) for k, v in params.items()))


def _alternatives(scn: Scenario) -> dict[str, list[Bucket]]:
    alts: dict[str, list[Bucket]] = {}
    alts.update(scn.workload.spec.distribution.alternatives)
    alts.update(scn.spec.alternative_distributions)
    declared = set(scn.workload.spec.parameters)
    for name, buckets in scn.spec.alternative_distributions.items():
        for i, b in enumerate(buckets):
            unknown = set(b.params) - declared
            if unknown:
                raise InputError(f"bucket sets parameter '{sorted(unknown)[0]}' that the workload does not declare",
                                 file=scn.file, path=f"alternative_distributions.{name}[{i}].params",
                                 expected="one of: " + ", ".join(sorted(declared)))
    return alts


def _kernel_sigs(graph: Graph) -> dict[tuple[Any, ...], int]:
    return {(o.name, cost_signature(o, graph)): i for i, o in enumerate(graph.ops) if o.is_kernel}


def _diff(base: Graph, var: Graph) -> tuple[list[int], list[int]]:
    """(baseline ops the variant replaced or changed, variant ops that are new or changed)."""
    bs, vs = _kernel_sigs(base), _kernel_sigs(var)
    return [i for s, i in bs.items() if s not in vs], [i for s, i in vs.items() if s not in bs]


def _kinds(base: Graph, var: Graph, new: list[int]) -> set[str]:
    """What a variant changed in one bucket, read from the graphs (never from names).

    fusion: a kernel that replaces several; swap: a kernel moved to another library;
    specialize: a kernel kept under its name with another shape, launch or efficiency;
    insert: a new kernel (a layout conversion, a padding copy); execution: a changed
    execution mode or host op.
    """
    kinds: set[str] = set()
    base_by_name = {o.name: o for o in base.ops}
    for i in new:
        op = var.ops[i]
        old = base_by_name.get(op.name)
        if len(op.replaces) >= 2:
            kinds.add("fusion")
        elif old is not None and old.library != op.library:
            kinds.add("swap")
        elif old is not None:
            kinds.add("specialize")
        else:
            kinds.add("insert")
    var_modes = {o.name: o.mode for o in var.ops}
    if any(o.name in var_modes and var_modes[o.name] != o.mode for o in base.ops):
        kinds.add("execution")
    host_ops = [(o.name, o.kind, o.host_s) for o in base.ops if not o.is_kernel]
    if host_ops != [(o.name, o.kind, o.host_s) for o in var.ops if not o.is_kernel] and "fusion" not in kinds:
        kinds.add("execution")
    return kinds


HOST_BOUND_SHARE = 0.5  # the host busy for at least half of the step: the GPU waits on it


def _host_hinge(weights: list[float], base_b: list[Mapping[str, Any]], var_b: list[Mapping[str, Any]],
                ) -> tuple[tuple[str, str], dict[str, float | None]] | None:
    """A reason when the decision hinges on host time: the baseline is host-bound (weighted host
    share at least HOST_BOUND_SHARE), or most of the step-time change is host time the variant
    removed or added (CUDA graphs, compile, fusing away launches)."""
    if not base_b or "host_busy_us" not in base_b[0]:
        return None
    total_w = sum(weights) or 1.0

    def avg(bs: list[Mapping[str, Any]], key: str) -> float:
        return sum(w * float(b[key]) for w, b in zip(weights, bs, strict=True)) / total_w

    base_t, var_t = avg(base_b, "time_us"), avg(var_b, "time_us")
    base_h, var_h = avg(base_b, "host_busy_us"), avg(var_b, "host_busy_us")
    share = base_h / base_t if base_t > 0 else 0.0
    d_step, d_host = base_t - var_t, base_h - var_h
    host_driven = abs(d_step) > 0 and d_host * d_step > 0 and abs(d_host) >= 0.5 * abs(d_step)
    if share < HOST_BOUND_SHARE and not host_driven:
        return None
    change = "removes" if d_host > 0 else "adds"
    text = (f"the decision hinges on host time: the host is busy {share * 100:.0f}% of the baseline step (weighted) "
            f"and the variant {change} {abs(d_host):.1f} us of it for a {d_step:+.1f} us step change; host costs come "
            "from the profile, so check them on the CPU and framework that will run it (kernelsim calibrate, or "
            "replay a trace)")
    return ("host_bound", text), {"base_host_share": share, "variant_host_share": var_h / var_t if var_t > 0 else 0.0}


def _bucket_view(bk: Mapping[str, Any]) -> dict[str, Any]:
    return {k: bk[k] for k in ("name", "weight", "time_us", "dominant", "breakdown_us", "path")}


def _where_time_goes(base_variant: Mapping[str, Any]) -> dict[str, Any]:
    buckets = base_variant["buckets"]
    total_w = sum(b["weight"] for b in buckets)
    breakdown = {t: sum(b["weight"] * b["breakdown_us"][t] for b in buckets) / total_w for t in TERMS}
    weighted = base_variant["weighted_time_us"]
    dominant = max(TERMS, key=lambda t: (breakdown[t], -TERMS.index(t)))
    return {
        "weighted_time_us": weighted,
        "breakdown_us": breakdown,
        "breakdown_share": {t: (breakdown[t] / weighted if weighted > 0 else 0.0) for t in TERMS},
        "dominant": dominant,
        "buckets": [_bucket_view(b) for b in buckets],
    }


def _hot_kernels(scn: Scenario, hw: Hardware, traces: list[Trace], exposed: list[dict[int, float]],
                 weights: list[float], base_weighted_s: float) -> list[dict[str, Any]]:
    total_w = sum(weights)
    fam: dict[str, dict[str, Any]] = {}
    for tr, ex, w in zip(traces, exposed, weights, strict=True):
        for i, (op, cost) in enumerate(zip(tr.graph.ops, tr.costs, strict=True)):
            if cost is None:
                continue
            name = family_name(op.name)
            f = fam.setdefault(name, {"kind": op.kind, "time": 0.0, "exposed": 0.0, "roof": 0.0, "att": 0.0,
                                      "flops": 0.0, "bytes": 0.0, "limiters": {}, "count": 0, "has_roof": True})
            share = w / total_w
            f["time"] += share * cost.time_s
            f["exposed"] += share * ex.get(i, 0.0)
            f["flops"] += share * cost.flops
            f["count"] += 1
            f["limiters"][cost.limiter] = f["limiters"].get(cost.limiter, 0.0) + share * cost.time_s
            r = roofline(op, tr.graph, cost, hw)
            if r is None:
                f["has_roof"] = False
            else:
                f["roof"] += share * r.roofline_s
                f["att"] += share * r.attainable_s
                f["bytes"] += share * r.bytes
    ranked = sorted(fam.items(), key=lambda kv: (-kv[1]["time"], kv[0]))[:HOT_KERNELS]
    per_bucket = [(w, tr.graph, tr.costs, tr.end_s) for tr, w in zip(traces, weights, strict=True)]
    out = []
    for rank, (name, f) in enumerate(ranked):
        exposed_share = f["exposed"] / base_weighted_s if base_weighted_s > 0 else 0.0
        limiter = max(f["limiters"], key=lambda k: (f["limiters"][k], k))
        slack = []
        for target in SLACK_TARGETS:
            s = speedup_needed(exposed_share, target)
            checked = None
            if s is not None and rank < SLACK_CHECKED:
                checked = simulated_gain(per_bucket, hw, _in_family(name), s)
            slack.append({"target_gain": target, "speedup": s, "reachable": s is not None,
                          "simulated_gain_at_speedup": checked})
        out.append({
            "name": name,
            "kind": f["kind"],
            "instances_per_step": f["count"] / len(traces),
            "weighted_time_us": f["time"] * 1e6,
            "share": f["time"] / base_weighted_s if base_weighted_s > 0 else 0.0,
            "exposed_us": f["exposed"] * 1e6,
            "exposed_share": exposed_share,
            "limiter": limiter,
            "limiters_share": {k: v / f["time"] for k, v in sorted(f["limiters"].items())} if f["time"] > 0 else {},
            "flops": f["flops"],
            "min_bytes": f["bytes"] if f["has_roof"] else None,
            "roofline_us": f["roof"] * 1e6 if f["has_roof"] else None,
            "headroom": f["time"] / f["roof"] if f["has_roof"] and f["roof"] > 0 else None,
            "attainable_us": f["att"] * 1e6 if f["has_roof"] else None,
            "attainable_headroom": f["time"] / f["att"] if f["has_roof"] and f["att"] > 0 else None,
            "slack": slack,
        })
    return out


def _in_family(name: str) -> Callable[[Op], bool]:
    return lambda op: family_name(op.name) == name


def _sum_costs(graph: Graph, costs: tuple[KernelCost | None, ...], idx: list[int], hw: Hardware) -> tuple[float, float, float]:
    """(time, roofline, attainable) seconds of the ops `idx`."""
    t = roof = att = 0.0
    for i in idx:
        c = costs[i]
        if c is None:
            continue
        t += c.time_s
        r = roofline(graph.ops[i], graph, c, hw)
        if r is not None:
            roof += r.roofline_s
            att += r.attainable_s
        else:
            roof += c.time_s
            att += c.time_s
    return t, roof, att


def _op_names(ops: list[Op]) -> list[str]:
    return sorted({family_name(o.name) for o in ops})


def advise_scenario(scn: Scenario) -> dict[str, Any]:
    """The advice for a loaded scenario (see the module docstring)."""
    settings = scn.spec.advice or AdviceSettings()
    alts = _alternatives(scn)
    result, traces = run_scenario(scn, keep_traces=True)
    main_keys = [_key(scn.workload.params_for(b)) for b in scn.buckets]
    extra: list[Bucket] = []
    seen = set(main_keys)
    for buckets in alts.values():
        for b in buckets:
            k = _key(scn.workload.params_for(b))
            if k not in seen:
                seen.add(k)
                extra.append(b)
    extra_result: dict[str, Any] | None = None
    extra_keys = [_key(scn.workload.params_for(b)) for b in extra]
    if extra:
        extra_result, _ = run_scenario(dataclasses.replace(scn, buckets=tuple(extra)))
    weights = [b.weight for b in scn.buckets]
    hw_out = []
    for hi, hw in enumerate(scn.hardware):
        hres = result["hardware"][hi]
        variants = hres["variants"]
        base_v = variants[0]
        base_traces = [traces[(hw.name, "baseline", bi)] for bi in range(len(scn.buckets))]
        base_exposed = [exposed_times(tr) for tr in base_traces]
        total_w = sum(weights)
        base_weighted_s = sum(w * tr.end_s for w, tr in zip(weights, base_traces, strict=True)) / total_w
        where = _where_time_goes(base_v)
        hot = _hot_kernels(scn, hw, base_traces, base_exposed, weights, base_weighted_s)
        extra_variants = extra_result["hardware"][hi]["variants"] if extra_result else None
        out_variants = []
        for vi, v in enumerate(variants[1:], start=1):
            out_variants.append(_advise_variant(scn, hw, v, vi, base_v, base_traces, base_exposed, weights,
                                                base_weighted_s, settings, alts, main_keys, extra_keys, extra_variants,
                                                traces))
        rec = _recommend(out_variants)
        hw_out.append({
            "name": hw.name, "gpu": hw.gpu, "profile": hw.source_file, "measured": hw.measured,
            "baseline": where, "hot_kernels": hot, "variants": out_variants, "recommendation": rec,
        })
    return {
        "schema": ADVICE_SCHEMA,
        "scenario": scn.spec.name,
        "scenario_file": scn.file,
        "workload": scn.workload.name,
        "kind": scn.workload.spec.kind,
        "min_gain": scn.spec.min_gain,
        "settings": settings.model_dump(),
        "alternative_distributions": sorted(alts),
        "hardware": hw_out,
    }


def _advise_variant(scn: Scenario, hw: Hardware, v: Mapping[str, Any], vi: int, base_v: Mapping[str, Any],
                    base_traces: list[Trace], base_exposed: list[dict[int, float]], weights: list[float],
                    base_weighted_s: float, settings: AdviceSettings, alts: Mapping[str, list[Bucket]],
                    main_keys: list[Any], extra_keys: list[Any], extra_variants: list[dict[str, Any]] | None,
                    traces: Mapping[tuple[str, str, int], Trace]) -> dict[str, Any]:
    total_w = sum(weights)
    kinds: set[str] = set()
    rep_t = rep_exp = rep_roof = rep_att = new_roof = 0.0
    replaced_names: set[str] = set()
    new_names: set[str] = set()
    new_limiters: dict[str, float] = {}
    for bi, (btr, bex, w) in enumerate(zip(base_traces, base_exposed, weights, strict=True)):
        vtr = traces[(hw.name, v["name"], bi)]
        replaced, new = _diff(btr.graph, vtr.graph)
        kinds |= _kinds(btr.graph, vtr.graph, new)
        share = w / total_w
        t, roof, att = _sum_costs(btr.graph, btr.costs, replaced, hw)
        rep_t += share * t
        rep_roof += share * roof
        rep_att += share * att
        rep_exp += share * sum(bex.get(i, 0.0) for i in replaced)
        new_roof += share * _sum_costs(vtr.graph, vtr.costs, new, hw)[1]
        for i in new:
            c = vtr.costs[i]
            if c is not None:
                new_limiters[c.limiter] = new_limiters.get(c.limiter, 0.0) + share * c.time_s
        replaced_names.update(_op_names([btr.graph.ops[i] for i in replaced]))
        new_names.update(_op_names([vtr.graph.ops[i] for i in new]))
    buckets = v["buckets"]
    base_b = base_v["buckets"]
    distributions = {}
    all_keys = main_keys + extra_keys
    times_v = {k: b["time_us"] for k, b in zip(main_keys, buckets, strict=True)}
    times_b = {k: b["time_us"] for k, b in zip(main_keys, base_b, strict=True)}
    if extra_variants is not None:
        ev = next(x for x in extra_variants if x["name"] == v["name"])
        times_v.update({k: b["time_us"] for k, b in zip(extra_keys, ev["buckets"], strict=True)})
        times_b.update({k: b["time_us"] for k, b in zip(extra_keys, extra_variants[0]["buckets"], strict=True)})
    for dname, dbuckets in alts.items():
        dw = {_key(scn.workload.params_for(b)): b.weight for b in dbuckets}
        distributions[dname] = (tuple(dw.get(k, 0.0) for k in all_keys), tuple(times_b[k] for k in all_keys),
                                tuple(times_v[k] for k in all_keys))
    order = tuple(k for k in ("fusion", "specialize", "swap", "execution", "insert") if k in kinds)
    figs = VariantFigures(
        name=v["name"], kinds=order, weights=tuple(weights),
        base_s=tuple(b["time_us"] * 1e-6 for b in base_b), var_s=tuple(b["time_us"] * 1e-6 for b in buckets),
        on_new_path=tuple("fallback" not in b["path"].split("+") for b in buckets),
        micro_gain=v["micro"]["gain"],
        replaced_share=rep_t / base_weighted_s if base_weighted_s > 0 else 0.0,
        replaced_exposed_share=rep_exp / base_weighted_s if base_weighted_s > 0 else 0.0,
        replaced_time_s=rep_t, replaced_roofline_s=rep_roof, replaced_attainable_s=rep_att, new_roofline_s=new_roof,
        distributions=distributions,
    )
    d = decide(figs, scn.spec.min_gain, settings)
    host = _host_hinge(weights, base_b, buckets)
    if host is not None:
        d = dataclasses.replace(d, reasons=(*d.reasons, host[0]), figures=d.figures | host[1])
    out: dict[str, Any] = {
        "name": v["name"],
        "description": v["description"],
        "changes": list(order) or ["nothing"],
        "kind": primary_kind(order),
        "decision": d.decision,
        "reasons": [{"code": c, "text": t} for c, t in d.reasons],
        "figures": d.figures | {
            "weighted_time_us": v["weighted_time_us"], "fallback_rate": v["fallback_rate"],
            "replaced_kernel_time_us": rep_t * 1e6, "replaced_roofline_us": rep_roof * 1e6,
            "replaced_attainable_us": rep_att * 1e6, "new_kernels_roofline_us": new_roof * 1e6,
        },
        "replaced_kernels": sorted(replaced_names),
        "new_kernels": sorted(new_names),
        "buckets": [
            {"name": b["name"], "params": b["params"], "weight": b["weight"], "time_us": b["time_us"],
             "baseline_time_us": bb["time_us"], "gain": b["gain_vs_baseline"], "path": b["path"],
             "dominant": b["dominant"], "take": take}
            for b, bb, take in zip(buckets, base_b, d.chosen, strict=True)
        ],
    }
    out["new_kernel_limiters_share"] = _shares(new_limiters)
    tw = sum(b["weight"] for b in buckets)
    out["figures"]["hbm_bytes"] = sum(b["weight"] * b["hbm_bytes"] for b in buckets) / tw
    out["figures"]["baseline_hbm_bytes"] = sum(b["weight"] * b["hbm_bytes"] for b in base_b) / tw
    out["figures"]["kernels"] = sum(b["weight"] * b["kernels"] for b in buckets) / tw
    out["figures"]["baseline_kernels"] = sum(b["weight"] * b["kernels"] for b in base_b) / tw
    out["reasons"].extend(_explain(out, d))
    out["gain_interval"] = _decision_interval(out, buckets, base_b)
    out["within_error"] = d.decision in POSITIVE and straddles_zero(out["gain_interval"])
    if out["within_error"]:
        lo, hi = out["gain_interval"]
        out["reasons"].insert(0, {"code": "within_error", "text": (
            f"within the model's error: measure before deciding (the gain it acts on, "
            f"{_pct_text(d.figures['dispatched_gain'] if d.decision in ('dispatch_by_bucket', 'specialize') else d.figures['step_gain'])}, "
            f"has a 90 % band of [{lo * 100:+.1f}, {hi * 100:+.1f}] %)")})
    out["summary"] = _summary(out)
    if d.decision in POSITIVE:
        out["acceptance"] = acceptance(scn, hw, out, d.figures["threshold"] or 0.0, settings)
    return out


def _pct_text(x: float | None) -> str:
    return "n/a" if x is None else f"{x * 100:+.1f} %"


def _decision_interval(v: Mapping[str, Any], buckets: list[Mapping[str, Any]],
                       base_b: list[Mapping[str, Any]]) -> list[float] | None:
    """The 90 % band of the gain the decision acts on: the buckets it takes the variant in (all
    of them for a "don't write"), each bucket's band weighted by its share of the baseline time."""
    take = [b["take"] for b in v["buckets"]]
    if not any(take):
        take = [True] * len(buckets)
    base_w = sum(bb["weight"] * bb["time_us"] for bb in base_b)
    gain = lo = hi = 0.0
    for b, bb, t in zip(buckets, base_b, take, strict=True):
        if not t:
            continue
        gi = b.get("gain_interval")
        if gi is None or base_w <= 0:
            return None
        share = bb["weight"] * bb["time_us"] / base_w
        gain += share * b["gain_vs_baseline"]
        lo += share * gi[0]
        hi += share * gi[1]
    return [lo, hi]


_VERB = {
    "fuse": "fuse", "specialize": "specialize for these buckets", "dispatch_by_bucket": "dispatch by bucket",
    "use_library": "use the other library's kernel", "adopt": "adopt it (no new kernel)",
    "keep_library": "keep the library kernel", "dont_write": "don't write this kernel",
}


def _shares(times: Mapping[str, float]) -> dict[str, float]:
    total = sum(times.values())
    return {k: v / total for k, v in sorted(times.items())} if total > 0 else {}


def _explain(v: Mapping[str, Any], d: Decision) -> list[dict[str, str]]:
    """Supporting figures: what bounds the new kernels, and the buckets that lose (with their dominant term)."""
    out = []
    f = v["figures"]
    if v["kind"] != "none" and f["baseline_hbm_bytes"] > 0:
        out.append({"code": "traffic", "text": f"HBM traffic per step {f['baseline_hbm_bytes'] / 1e6:.0f} → "
                    f"{f['hbm_bytes'] / 1e6:.0f} MB ({(f['hbm_bytes'] / f['baseline_hbm_bytes'] - 1) * 100:+.0f} %), kernels "
                    f"{f['baseline_kernels']:.1f} → {f['kernels']:.1f}"})
    lim = v["new_kernel_limiters_share"]
    if lim and d.decision not in ("fuse", "use_library", "adopt"):
        parts = ", ".join(f"{k} {x * 100:.0f} %" for k, x in sorted(lim.items(), key=lambda kv: -kv[1]) if x >= 0.05)
        out.append({"code": "new_kernel_limiters", "text": f"the new kernels' time is bound by {parts}"})
    losers = sorted((b for b in v["buckets"] if b["gain"] < 0 and not b["take"]), key=lambda b: b["gain"])[:3]
    if losers and d.decision != "keep_library":
        out.append({"code": "losing_buckets", "text": "slower with it: " + ", ".join(
            f"{b['name']} ({b['gain'] * 100:+.1f} %, {b['dominant']}-dominated)" for b in losers)})
    return out


def _summary(v: Mapping[str, Any]) -> str:
    verb = _VERB[v["decision"]]
    if v["decision"] == "dont_write" and v["kind"] in ("execution", "other"):
        verb = "not worth adopting (no kernel involved)"
    head = f"{v['name']}: {verb}"
    if v["decision"] in ("specialize", "dispatch_by_bucket"):
        taken = [b["name"] for b in v["buckets"] if b["take"]]
        head += f" (new path for {', '.join(taken)}; baseline for the rest)"
    return head + " — " + "; ".join(r["text"] for r in v["reasons"]) + "."


def _recommend(variants: list[dict[str, Any]]) -> dict[str, Any]:
    positive = [v for v in variants if v["decision"] in POSITIVE and not v["within_error"]]
    unsure = [v for v in variants if v["within_error"]]
    if not positive and unsure:
        names = ", ".join(v["name"] for v in unsure)
        return {"variant": None, "decision": "measure_first",
                "text": f"within the model's error: measure before deciding ({names}: the predicted gain's 90 % band "
                        "includes zero)", "dispatch_table": None, "acceptance": None}
    if not positive:
        return {"variant": None, "decision": "dont_write",
                "text": "don't write a kernel: no variant gains enough end to end (see each variant's reasons)",
                "dispatch_table": None, "acceptance": None}

    def gain(v: Mapping[str, Any]) -> float:
        return float(v["acceptance"]["gain_vs_baseline"])

    best = max(positive, key=lambda v: (gain(v), v["name"]))
    return {"variant": best["name"], "decision": best["decision"], "text": best["summary"],
            "dispatch_table": dispatch_table(best), "acceptance": best["acceptance"]}
