"""A captured workload beside its hand-written counterpart: the same buckets, the same profiles, the
attention backend the capture says PyTorch runs named on both sides.

Used by benchmarks/capture_vs_handwritten.py (prints the comparison) and
tests/capture/test_vs_shipped.py (holds it within 3 %)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from sim.run import load_scenario, run_scenario


def flat_ops(ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ops of a workload document, repeat blocks' bodies included (their dicts, editable in place)."""
    out: list[dict[str, Any]] = []
    for op in ops:
        if op.get("kind") == "repeat":
            out.extend(flat_ops(op["ops"]))
        else:
            out.append(op)
    return out


def captured_backends(captured: dict[str, Any]) -> set[str]:
    """The attention backends a captured workload names (PyTorch's choice at capture time)."""
    return {op["backend"] for op in flat_ops(captured["ops"]) if op.get("kind") == "attention" and op.get("backend")}


def name_backend(shipped: dict[str, Any], backends: set[str]) -> int:
    """Name the captured backend on the shipped document's attention ops that leave it to the profile's
    default; returns how many ops were named."""
    named = 0
    if not backends:
        return 0
    backend = sorted(backends)[0]
    for op in flat_ops(shipped["ops"]):
        if op.get("kind") == "attention":
            op["backend"] = backend
            named += 1
    return named


def step_summary(workload: Path, hardware: list[str], tmp: Path,
                 buckets: list[dict[str, Any]] | None = None) -> dict[str, dict[str, float]]:
    """Per profile: the weighted step time, weighted kernel time and kernels per step (first bucket) of
    a workload run over its own buckets (or `buckets`)."""
    scn: dict[str, Any] = {"schema": "kernelsim.scenario/v1", "name": workload.stem, "workload": str(workload),
                           "hardware": hardware}
    if buckets is not None:
        scn["distribution"] = buckets
    scn_path = tmp / f"{workload.stem}.scn.yaml"
    scn_path.write_text(yaml.safe_dump(scn))
    result, _ = run_scenario(load_scenario(scn_path))
    out: dict[str, dict[str, float]] = {}
    for hw in result["hardware"]:
        v = hw["variants"][0]
        out[hw["name"]] = {"step": v["weighted_time_us"],
                           "kernel": sum(b["kernel_time_us"] * b["weight"] for b in v["buckets"]),
                           "kernels": v["buckets"][0]["kernels"]}
    return out


def compare(captured_path: Path, shipped_path: Path, hardware: list[str], tmp: Path
            ) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, float]]]:
    """(captured, shipped) step summaries over the shipped workload's buckets, the shipped file run with
    the captured attention backend (written to `tmp`, the shipped file untouched)."""
    captured = yaml.safe_load(captured_path.read_text())
    shipped = yaml.safe_load(shipped_path.read_text())
    name_backend(shipped, captured_backends(captured))
    named_path = tmp / shipped_path.name
    named_path.write_text(yaml.safe_dump(shipped, sort_keys=False))
    buckets = shipped["distribution"]["buckets"]
    return step_summary(captured_path, hardware, tmp, buckets), step_summary(named_path, hardware, tmp, buckets)
