"""The valid inputs that the fuzzer mutates: a small scenario and workload, and a small trace."""

from __future__ import annotations

import json
from typing import Any

from sim.ingest.synthetic import synthetic_events

WORKLOAD: dict[str, Any] = {
    "schema": "kernelsim.workload/v1",
    "name": "fz",
    "kind": "training",
    "mode": "eager",
    "parameters": {"tokens": 256, "hidden": 256},
    "distribution": {"buckets": [
        {"params": {"tokens": 128}, "weight": 0.5},
        {"params": {"tokens": 256}, "weight": 0.5},
    ]},
    "tensors": {
        "x": {"shape": ["tokens", "hidden"], "dtype": "bf16"},
        "w": {"shape": ["hidden", "hidden"], "dtype": "bf16"},
        "h": {"shape": ["tokens", "hidden"], "dtype": "bf16"},
        "y": {"shape": ["tokens", "hidden"], "dtype": "bf16"},
        "s": {"shape": ["tokens"], "dtype": "fp32"},
    },
    "ops": [
        {"name": "fc", "kind": "gemm", "m": "tokens", "n": "hidden", "k": "hidden", "reads": ["x", "w"], "writes": ["h"]},
        {"name": "act", "kind": "elementwise", "reads": ["h"], "writes": ["y"], "math": {"gelu": 1},
         "launch": {"block": 128, "elems_per_thread": 4}},
        {"name": "scale", "kind": "elementwise", "reads": ["y"], "writes": ["y"], "math": {"mul": 1},
         "numel": "tokens * hidden"},
        {"name": "stack", "kind": "repeat", "count": 2, "ops": [
            {"name": "e", "kind": "elementwise", "reads": ["y"], "writes": ["y"], "math": {"add": 1}},
        ]},
        {"name": "red", "kind": "reduction", "rows": "tokens", "cols": "hidden", "reads": ["y"], "writes": ["s"]},
        {"name": "att", "kind": "attention", "batch": 1, "heads": "hidden // 64", "seq_q": "tokens",
         "seq_kv": "tokens", "head_dim": 64, "causal": True, "reads": ["x"], "writes": ["h"]},
        {"name": "cp", "kind": "copy", "bytes": "tokens * hidden * 2", "reads": ["y"], "writes": ["h"]},
        {"name": "lay", "kind": "layout", "transform": "transpose", "reads": ["h"], "writes": ["y"]},
        {"name": "hst", "kind": "host", "duration_us": "tokens / 100", "framework_ops": 2},
    ],
}

SCENARIO: dict[str, Any] = {
    "schema": "kernelsim.scenario/v1",
    "name": "fz",
    "workload": "workload.yaml",
    "hardware": ["h200-sxm"],
    "variants": [
        {"name": "fused", "transforms": [{"fuse": {"ops": ["act", "scale"], "name": "act_scale",
                                                    "launch": {"block": 128, "elems_per_thread": 4}}}]},
        {"name": "spec", "transforms": [{"specialize": {"op": "fc", "when": "tokens % 128 == 0",
                                                         "pad": {"k": "round_up(k, 64)"}}}]},
        {"name": "disp", "transforms": [{"dispatch": {"when": "tokens >= 256", "then": [
            {"fuse": {"ops": ["act", "scale"], "name": "f2"}}]}}]},
    ],
}

SWEEP: dict[str, Any] = {"params": {"tokens": [128, 256]}}


def trace_events() -> list[dict[str, Any]]:
    """A small valid Kineto trace: one step, one layer, small shapes."""
    return list(synthetic_events(steps=2, layers=1, tokens=64, hidden=64))


def trace_doc(events: list[dict[str, Any]]) -> dict[str, Any]:
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "synthetic"}], "traceEvents": events}


def trace_text(events: list[dict[str, Any]]) -> str:
    return json.dumps(trace_doc(events))
