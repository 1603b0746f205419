"""Serving scenarios: load the `serving:` section, run every (hardware, variant, rate), sweep, compare variants.

The result is plain data in the `kernelsim.serve/v1` shape (docs/serving.md): per hardware
profile and serving variant, one point per arrival rate (latency percentiles, throughput,
GPU busy share, padding), the highest rate meeting a p99 target, and the p50/p99
comparison of every variant with the first one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sim.errors import InputError
from sim.hardware import Hardware, load_profile
from sim.run import Scenario, load_scenario, variant_graph
from sim.schema.serving import ServingSpec, ServingVariant
from sim.serving.batching import make_policy
from sim.serving.loop import simulate_serving
from sim.serving.metrics import run_metrics
from sim.serving.requests import (
    RequestSpec,
    log_rate_per_s,
    poisson_requests,
    read_request_log,
    rescale,
)
from sim.serving.steps import StepCost, StepPricer
from sim.validate.bands import ANY, load_bands
from sim.workload import load_workload

SERVE_SCHEMA = "kernelsim.serve/v1"


@dataclass(frozen=True)
class ServingScenario:
    file: str
    scenario: Scenario  # the decode workload and its variants
    prefill: Scenario | None  # the same variants over the prefill workload
    spec: ServingSpec
    hardware: tuple[Hardware, ...]
    log: tuple[RequestSpec, ...] | None  # a replayed request log


def load_serving(path: Path, hardware_override: list[str] | None = None) -> ServingScenario:
    """Load a scenario with a `serving:` section and check every name it refers to (bad input → InputError)."""
    scn = load_scenario(path, hardware_override)
    file = str(path)
    spec = scn.spec.serving
    if spec is None:
        raise InputError("the scenario has no 'serving' section", file=file, path="serving",
                         expected="a serving section (docs/serving.md)")
    base = path.parent
    if hardware_override or spec.hardware is None:
        hardware = scn.hardware
    else:
        hardware = tuple(load_profile(h, base, file=file, path=f"serving.hardware[{i}]")
                         for i, h in enumerate(spec.hardware))
    known = ["baseline"] + [v.name for v in scn.spec.variants]
    for i, v in enumerate(spec.variants):
        for key in ("decode", "prefill", "uncaptured"):
            if getattr(v, key) not in known:
                raise InputError("unknown scenario variant", file=file, path=f"serving.variants[{i}].{key}",
                                 value=getattr(v, key), expected="one of: " + ", ".join(known))
    declared = set(scn.workload.spec.parameters)
    for key in ("batch_param", "cache_len_param"):
        name = getattr(spec.decode, key)
        if name not in declared:
            raise InputError("the decode workload has no such parameter", file=file, path=f"serving.decode.{key}",
                             value=name, expected="one of: " + ", ".join(sorted(declared)))
    prefill = _load_prefill(scn, spec, base, file)
    log = None
    if spec.arrival.process == "log":
        log_path = Path(spec.arrival.file or "")
        log = tuple(read_request_log(log_path if log_path.is_absolute() else base / log_path))
        if spec.warmup_requests >= len(log):
            raise InputError("warmup_requests leaves no request to measure", file=file, path="serving.warmup_requests",
                             value=spec.warmup_requests, expected=f"fewer than the log's {len(log)} requests")
    return ServingScenario(file=file, scenario=scn, prefill=prefill, spec=spec, hardware=hardware, log=log)


def _load_prefill(scn: Scenario, spec: ServingSpec, base: Path, file: str) -> Scenario | None:
    if spec.prefill is None:
        return None
    wl_path = Path(spec.prefill.workload)
    wl_path = wl_path if wl_path.is_absolute() else base / wl_path
    if not wl_path.is_file():
        raise InputError("prefill workload file not found", file=file, path="serving.prefill.workload",
                         value=spec.prefill.workload, expected="a path relative to the scenario file")
    workload = load_workload(wl_path)
    declared = set(workload.spec.parameters)
    for key in ("batch_param", "seq_param", "past_param"):
        name = getattr(spec.prefill, key)
        if name is not None and name not in declared:
            raise InputError("the prefill workload has no such parameter", file=file,
                             path=f"serving.prefill.{key}", value=name, expected="one of: " + ", ".join(sorted(declared)))
    pre = Scenario(spec=scn.spec, file=scn.file, workload=workload, hardware=scn.hardware, buckets=())
    # The prefill variants must apply to the prefill graph: check once, at load time.
    graph = workload.build(dict(workload.spec.parameters))
    for name in sorted({v.prefill for v in spec.variants} - {"baseline"}):
        vi = next(i for i, v in enumerate(scn.spec.variants) if v.name == name)
        variant_graph(pre, scn.spec.variants[vi], vi, graph, dict(workload.spec.parameters))
    return pre


def requests_at(ss: ServingScenario, rate_per_s: float | None) -> list[RequestSpec]:
    """The requests of one run: Poisson at `rate_per_s`, or the log (rescaled to `rate_per_s` when given)."""
    spec = ss.spec
    if ss.log is not None:
        return list(ss.log) if rate_per_s is None else rescale(list(ss.log), rate_per_s)
    if spec.prompt_tokens is None or spec.output_tokens is None or rate_per_s is None:
        raise InputError("poisson arrivals need a rate, prompt_tokens and output_tokens", file=ss.file, path="serving")
    return poisson_requests(spec.requests, rate_per_s, spec.prompt_tokens, spec.output_tokens, spec.seed)


def native_rate(ss: ServingScenario) -> float | None:
    if ss.log is not None:
        return log_rate_per_s(list(ss.log))
    return ss.spec.arrival.rate_per_s


def run_point(ss: ServingScenario, pricer: StepPricer, rate_per_s: float | None) -> dict[str, Any]:
    """Serve the requests at one rate with one pricer (one hardware × serving variant)."""
    spec = ss.spec
    reqs = requests_at(ss, rate_per_s)
    policy = make_policy(spec.batching, models_prefill=ss.prefill is not None)
    run = simulate_serving(reqs, policy, pricer, spec.scheduler_overhead_us * 1e-6)
    offered = rate_per_s if rate_per_s is not None else native_rate(ss)
    out = run_metrics(run, offered, spec.warmup_requests)
    if pricer.captured_sizes is None:
        out["uncaptured_decode_step_share"] = None
    return out


def _metric_p99(point: dict[str, Any], metric: str) -> float:
    v = point[f"{metric}_ms"]["p99"]
    return float("inf") if v is None else float(v)


def max_rate_meeting(evaluate: Callable[[float], dict[str, Any]], rates: Sequence[float], target_ms: float,
                     metric: str, bisect_steps: int) -> dict[str, Any]:
    """The highest arrival rate whose p99 `metric` is within `target_ms`.

    Walks the swept rates upward to the first that misses, then bisects between the last
    that met it and that one. `evaluate` runs (or looks up) a point.
    """
    last_ok: float | None = None
    first_bad: float | None = None
    for r in sorted(rates):
        if _metric_p99(evaluate(r), metric) <= target_ms:
            last_ok = r
        else:
            first_bad = r
            break
    if last_ok is None:
        return {"rate_per_s": None, "bracket_per_s": [None, first_bad], "note": "the lowest swept rate misses the target"}
    if first_bad is None:
        return {"rate_per_s": last_ok, "bracket_per_s": [last_ok, None],
                "note": "every swept rate meets the target: a lower bound"}
    lo, hi = last_ok, first_bad
    for _ in range(bisect_steps):
        mid = 0.5 * (lo + hi)
        if _metric_p99(evaluate(mid), metric) <= target_ms:
            lo = mid
        else:
            hi = mid
    return {"rate_per_s": lo, "bracket_per_s": [lo, hi], "note": ""}


def _gain(ref: float | None, v: float | None) -> float | None:
    if ref is None or v is None or ref <= 0:
        return None
    return 1.0 - v / ref


def _band(gain: float | None) -> list[float] | None:
    """The step-level gain band (sim.validate.bands, unseen shapes, regimes pooled) around a latency gain:
    request latencies are sums of simulated steps, so their gain inherits the step gain's error
    (queueing can amplify it near saturation; the band does not model that)."""
    bands = load_bands()
    if gain is None or bands is None:
        return None
    band = bands.gain(gain, ANY, "unseen")
    return None if band is None else [band[0], band[1]]


def _change(gain: float) -> str:
    return f"{gain:.1%} better" if gain >= 0 else f"{-gain:.1%} worse"


def compare(points: dict[str, dict[str, Any]], reference: str, rate: float | None) -> list[dict[str, Any]]:
    """Each variant against the reference at one rate: p50/p90/p99 gains (1 − variant / reference)."""
    ref = points[reference]
    rows = []
    for name, p in points.items():
        if name == reference:
            continue
        row: dict[str, Any] = {"variant": name, "reference": reference, "rate_per_s": rate}
        for metric in ("e2e", "ttft", "tpot"):
            row[metric] = {q: _gain(ref[f"{metric}_ms"][q], p[f"{metric}_ms"][q]) for q in ("p50", "p90", "p99")}
            row[f"{metric}_interval"] = {q: _band(g) for q, g in row[metric].items()}
        rate_txt = f"{rate:g} requests/s" if rate is not None else "the log's rate"
        parts = []
        for metric in ("e2e", "tpot", "ttft"):
            g50, g99 = row[metric]["p50"], row[metric]["p99"]
            if g50 is not None and g99 is not None:
                joint = " but" if (g50 > 0) != (g99 > 0) or (g50 > 0 and g99 < 0.75 * g50) else ","
                parts.append(f"{metric.upper()} p50 {_change(g50)}{joint} p99 {_change(g99)}")
        if parts:
            row["sentence"] = f"at {rate_txt}, {name} vs {reference}: " + "; ".join(parts)
        rows.append(row)
    return rows


def _variant_info(v: ServingVariant) -> dict[str, Any]:
    return {"name": v.name, "description": v.description, "decode": v.decode, "prefill": v.prefill,
            "capture_batch_sizes": v.capture_batch_sizes, "uncaptured": v.uncaptured}


def run_serving(ss: ServingScenario, rates: Sequence[float] | None = None) -> dict[str, Any]:
    """Every hardware × serving variant × rate (plus the report rate and the max-rate search)."""
    spec = ss.spec
    sweep_rates = list(rates) if rates else (list(spec.sweep.rates_per_s) if spec.sweep else [])
    report_rate = spec.report_rate_per_s or (None if ss.log is not None and not sweep_rates else native_rate(ss))
    all_rates = sorted(set(sweep_rates) | ({report_rate} if report_rate is not None else set()))
    point_rates: list[float | None] = list(all_rates) if all_rates else [None]
    target = spec.sweep.p99_target_ms if spec.sweep else None
    metric = spec.sweep.target_metric if spec.sweep else "e2e"
    hw_out = []
    for hw in ss.hardware:
        cache: dict[tuple[str, str, tuple[tuple[str, float], ...]], StepCost] = {}
        variants_out = []
        at_report: dict[str, dict[str, Any]] = {}
        for v in spec.variants:
            pricer = StepPricer(ss.scenario, ss.prefill, hw, v, spec.decode, spec.prefill, cache)
            memo: dict[float | None, dict[str, Any]] = {}

            def evaluate(rate: float | None, pricer: StepPricer = pricer,
                         memo: dict[float | None, dict[str, Any]] = memo) -> dict[str, Any]:
                if rate not in memo:
                    memo[rate] = run_point(ss, pricer, rate)
                return memo[rate]

            points = [evaluate(r) for r in point_rates]
            max_rate = None
            if target is not None and sweep_rates:
                max_rate = max_rate_meeting(evaluate, sweep_rates, target, metric, spec.sweep.bisect_steps
                                            if spec.sweep else 0)
            at_report[v.name] = evaluate(report_rate)
            variants_out.append({**_variant_info(v), "points": points, "max_rate": max_rate,
                                 "search": [memo[r] for r in sorted(k for k in memo if k is not None)
                                            if r not in point_rates]})
        hw_out.append({"name": hw.name, "gpu": hw.gpu, "profile": hw.source_file, "measured": hw.measured,
                       "shapes_priced": len(cache), "variants": variants_out,
                       "comparison": compare(at_report, spec.variants[0].name, report_rate)})
    return {
        "schema": SERVE_SCHEMA,
        "scenario": ss.scenario.spec.name,
        "workload": ss.scenario.workload.name,
        "prefill_workload": ss.prefill.workload.name if ss.prefill is not None else None,
        "seed": spec.seed,
        "arrival": spec.arrival.process,
        "batching": spec.batching.model_dump(mode="json"),
        "report_rate_per_s": report_rate,
        "p99_target_ms": target,
        "target_metric": metric,
        "hardware": hw_out,
    }
