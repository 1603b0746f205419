"""What the advice commits to: acceptance criteria to check after building, and the dispatch table.

Acceptance criteria (`kernelsim.acceptance/v1`): per bucket the path the plan takes and its
expected end-to-end step time next to the baseline's, the weighted time and gain, coverage
and fallback rate, and the checks a measurement must pass — in the same units and bucket
names as `kernelsim run --json`, so `validate` can compare them with measured steps.

Dispatch table (`kernelsim.dispatch/v1`): per bucket, a predicate on the parameters that
vary between buckets (exact values) → the path, with the predicted step times of both paths
and the margin; shapes in no entry take `default_path` (the baseline: the library path).
sim/dispatch_table.py loads it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sim.dispatch_table import DISPATCH_SCHEMA
from sim.hardware import Hardware
from sim.run import Scenario
from sim.schema.scenario import AdviceSettings

ACCEPTANCE_SCHEMA = "kernelsim.acceptance/v1"

BASELINE_PATH = "baseline"


def varying_parameters(buckets: Sequence[Mapping[str, Any]]) -> list[str]:
    """The parameters whose value differs between buckets (all of them if there is one bucket)."""
    names = sorted(buckets[0]["params"]) if buckets else []
    vary = [n for n in names if len({b["params"][n] for b in buckets}) > 1]
    return vary or names


def acceptance(scn: Scenario, hw: Hardware, v: Mapping[str, Any], threshold: float,
               settings: AdviceSettings) -> dict[str, Any]:
    buckets = v["buckets"]
    total_w = sum(b["weight"] for b in buckets)
    rows = []
    for b in buckets:
        take = bool(b["take"])
        expected = b["time_us"] if take else b["baseline_time_us"]
        rows.append({
            "name": b["name"], "params": b["params"], "weight": b["weight"],
            "path": v["name"] if take else BASELINE_PATH,
            "variant_path": b["path"] if take else BASELINE_PATH,
            "expected_time_us": expected, "baseline_time_us": b["baseline_time_us"],
            "expected_gain": 1.0 - expected / b["baseline_time_us"] if b["baseline_time_us"] > 0 else 0.0,
        })
    weighted = sum(r["weight"] * r["expected_time_us"] for r in rows) / total_w
    base = sum(r["weight"] * r["baseline_time_us"] for r in rows) / total_w
    coverage = sum(r["weight"] for r in rows if r["path"] != BASELINE_PATH and "fallback" not in r["variant_path"].split("+")) / total_w
    fallback = 1.0 - coverage
    gain = 1.0 - weighted / base if base > 0 else 0.0
    return {
        "schema": ACCEPTANCE_SCHEMA,
        "scenario": scn.spec.name,
        "hardware": hw.name,
        "variant": v["name"],
        "decision": v["decision"],
        "buckets": rows,
        "weighted_time_us": weighted,
        "baseline_weighted_time_us": base,
        "gain_vs_baseline": gain,
        "coverage": coverage,
        "fallback_rate": fallback,
        "checks": {
            "step_gain_at_least": threshold,
            "bucket_gain_at_least": -settings.max_bucket_regression,
            "coverage_at_least": coverage,
            "fallback_rate_at_most": fallback,
        },
    }


def dispatch_table(v: Mapping[str, Any]) -> dict[str, Any]:
    """The plan of one hardware as a dispatch table (see the module docstring)."""
    acc = v["acceptance"]
    rows = acc["buckets"]
    keys = varying_parameters(rows)
    entries = []
    for r, b in zip(rows, v["buckets"], strict=True):
        other = r["baseline_time_us"] if r["path"] != BASELINE_PATH else b["time_us"]
        chosen = r["expected_time_us"]
        entries.append({
            "bucket": r["name"],
            "match": {k: r["params"][k] for k in keys},
            "when": " and ".join(f"{k} == {_num(r['params'][k])}" for k in keys),
            "path": r["path"],
            "predicted_time_us": {BASELINE_PATH: r["baseline_time_us"], v["name"]: b["time_us"]},
            "margin": 1.0 - chosen / other if other > 0 else 0.0,
            "weight": r["weight"],
        })
    return {
        "hardware": acc["hardware"],
        "variant": v["name"],
        "decision": v["decision"],
        "parameters": keys,
        "default_path": BASELINE_PATH,
        "entries": entries,
    }


def dispatch_document(advice: Mapping[str, Any]) -> dict[str, Any]:
    """The `--dispatch-table` file: one table per hardware profile (a baseline-only table where no variant wins)."""
    tables = []
    for hw in advice["hardware"]:
        t = hw["recommendation"]["dispatch_table"]
        if t is None:
            base = hw["baseline"]["buckets"]
            params = [b for v in hw["variants"][:1] for b in v["buckets"]] or []
            keys = varying_parameters(params) if params else []
            t = {"hardware": hw["name"], "variant": None, "decision": "dont_write", "parameters": keys,
                 "default_path": BASELINE_PATH,
                 "entries": [{"bucket": p["name"], "match": {k: p["params"][k] for k in keys},
                              "when": " and ".join(f"{k} == {_num(p['params'][k])}" for k in keys),
                              "path": BASELINE_PATH, "predicted_time_us": {BASELINE_PATH: bb["time_us"]},
                              "margin": 0.0, "weight": p["weight"]} for p, bb in zip(params, base, strict=True)]}
        tables.append(t)
    return {"schema": DISPATCH_SCHEMA, "scenario": advice["scenario"], "tables": tables}


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))
