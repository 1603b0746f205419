"""The capture API: a model (or a factory of one per parameter values) -> a workload file.

    import sim.capture
    result = sim.capture.capture_factory(sim.capture.examples.gpt, {"batch": 8, "seq": 512})
    result.write("gpt.yaml")

`capture(model, example_inputs)` records one fixed-shape step; `capture_factory` rebuilds the
step at other parameter values to turn its shapes into expressions (sim.capture.shapes).
"""

from __future__ import annotations

import copy
import json
import os
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from sim.capture.lower import Lowered, lower
from sim.capture.shapes import parameterize
from sim.errors import InputError, KernelsimError

SDPA_BACKENDS = ("cudnn", "flash", "efficient", "math")


@dataclass
class CaptureResult:
    """A captured workload (a dict in the workload file's format) and what the capture could not do."""

    workload: dict[str, Any]
    uncosted: dict[str, int]
    unsolved: list[str]
    recording: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    bundle: dict[str, Any] = field(default_factory=dict)  # every recording (capture_factory, keep_recordings)

    def yaml(self) -> str:
        return dump_workload(self.workload, self.notes)

    def write(self, path: str | Path) -> None:
        Path(path).write_text(self.yaml(), encoding="utf-8")


def record(step: Any, params: Mapping[str, float] | None = None, *, sdpa_backend: str | None = None) -> dict[str, Any]:
    """Record one step (a Step, (model, inputs) or dict) built on the meta device; SDPA runs the
    backend the GPU picks for its shapes (lowering.yaml `sdpa`) unless `sdpa_backend` names one."""
    from sim.capture.record import as_step, record_step

    if sdpa_backend is not None and sdpa_backend not in SDPA_BACKENDS:
        raise InputError("unknown SDPA backend", path="sdpa_backend", value=sdpa_backend,
                         expected="one of: " + ", ".join(SDPA_BACKENDS))
    return record_step(as_step(step), params, sdpa_backend=sdpa_backend)


def _record_factory(factory: Callable[..., Any], params: Mapping[str, float],
                    sdpa_backend: str | None = None) -> dict[str, Any]:
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - exercised only without torch
        raise KernelsimError("capture needs torch: pip install 'kernelsim[torch]'") from exc
    with torch.device("meta"):
        built = factory(**{k: int(v) if float(v).is_integer() else v for k, v in params.items()})
    return record(built, params, sdpa_backend=sdpa_backend)


def _body(lowered: Lowered) -> dict[str, Any]:
    return {"tensors": copy.deepcopy(lowered.tensors), "ops": copy.deepcopy(lowered.ops)}


def capture(model: Any, example_inputs: Any, *, name: str = "captured", train: bool = True,
            loss: Callable[[Any], Any] | None = None, optimizer: Callable[[list[Any]], Any] | None = None,
            module_calls: bool = True, sdpa_backend: str | None = None) -> CaptureResult:
    """Capture one step of `model` (on the meta device) at the example inputs' fixed shapes."""
    inputs = tuple(example_inputs) if isinstance(example_inputs, list | tuple) else (example_inputs,)
    step = {"model": model, "inputs": inputs, "train": train, "loss": loss, "optimizer": optimizer}
    rec = record(step, sdpa_backend=sdpa_backend)
    return from_recordings(rec, {}, {}, name=name, module_calls=module_calls)


def capture_factory(factory: Callable[..., Any], params: Mapping[str, float], *, vary: list[str] | None = None,
                    name: str | None = None, buckets: list[dict[str, Any]] | None = None,
                    module_calls: bool = True, keep_recordings: bool = False,
                    sdpa_backend: str | None = None) -> CaptureResult:
    """Capture `factory(**params)` at `params`, and again with each parameter in `vary` (default:
    all) doubled, then once with all of them tripled to check the shape expressions."""
    vary = list(params) if vary is None else vary
    for p in vary:
        if p not in params:
            raise KernelsimError(f"capture: --vary names '{p}', which is not a parameter (have: {', '.join(params)})")
    base = _record_factory(factory, params, sdpa_backend)
    doubled = {p: _record_factory(factory, {**params, p: params[p] * 2}, sdpa_backend) for p in vary}
    check_params = {**params, **{p: params[p] * 3 for p in vary}}
    check = _record_factory(factory, check_params, sdpa_backend) if vary else None
    name = name or str(getattr(factory, "__name__", "captured"))
    result = from_recordings(base, doubled, check_params if check else {}, check=check, name=name, params=params,
                             vary=vary, buckets=buckets, module_calls=module_calls)
    if keep_recordings:
        result.bundle = {"schema": "kernelsim.capture-bundle/v1", "name": name, "params": dict(params), "vary": vary,
                         "base": base, "doubled": doubled, "check": check,
                         "check_params": check_params if check else {}}
    return result


def from_recordings(base: dict[str, Any], doubled: Mapping[str, dict[str, Any]], check_params: Mapping[str, float],
                    *, check: dict[str, Any] | None = None, name: str = "captured",
                    params: Mapping[str, float] | None = None, vary: list[str] | None = None,
                    buckets: list[dict[str, Any]] | None = None, module_calls: bool = True) -> CaptureResult:
    """Lower recordings (no torch needed) and build the workload."""
    params = dict(params or base.get("params") or {})
    lowered = lower(base, module_calls=module_calls)
    body = _body(lowered)
    unsolved: list[str] = []
    if doubled:
        unsolved = parameterize(
            body, params, {p: _body(lower(r, module_calls=module_calls)) for p, r in doubled.items()},
            check=_body(lower(check, module_calls=module_calls)) if check is not None else None,
            check_params=check_params)
    vary = list(doubled) if vary is None else vary
    kinds = {o.get("phase") for o in lowered.ops}
    kind = "training" if "backward" in kinds else "serving"
    declared = {p: params[p] for p in vary}
    workload: dict[str, Any] = {
        "schema": "kernelsim.workload/v1",
        "name": name,
        "kind": kind,
        "description": f"captured from PyTorch {lowered.torch_recorded} on the meta device"
                       + (f" at {', '.join(f'{k}={v:g}' for k, v in params.items())}" if params else ""),
        "mode": "eager",
        "parameters": declared,
        "distribution": {"buckets": buckets or [{"params": declared, "weight": 1.0}]},
        "tensors": body["tensors"],
        "ops": body["ops"],
    }
    notes = [
        f"Captured by `kernelsim capture` from torch {lowered.torch_recorded}; kernels from "
        f"sim/capture/lowering.yaml (describes torch {lowered.torch_table}).",
        "Each op's trailing comment names the aten op it came from. Op names are module paths:",
        "select them in a scenario with `ops_under: MODULE` (fuse, mode). `framework_op` names the",
        "torch call an op belongs to (the profile's host table prices it).",
    ]
    sdpa = base.get("sdpa") or {}
    if sdpa.get("backends"):
        how = f"forced: {sdpa['forced']}" if sdpa.get("forced") else (
            f"as PyTorch picks by shape, lowering.yaml sdpa, torch {sdpa.get('table_torch', '?')}")
        notes.append(f"SDPA backends ({how}): {', '.join(sorted(set(sdpa['backends'])))}.")
    if not module_calls:
        notes.append("nn.Module call overhead left out (module_calls=False / --no-module-calls).")
    if lowered.uncosted:
        listed = ", ".join(f"{k} x{v}" for k, v in sorted(lowered.uncosted.items()))
        notes.append(f"UNCOSTED (no lowering; counted as one framework op each): {listed}")
        warnings.warn(f"capture: aten ops with no lowering (priced as host framework ops only): {listed}",
                      stacklevel=2)
    if unsolved:
        notes.append(f"Sizes that vary with the parameters but fit no expression (kept as numbers): "
                     f"{', '.join(unsolved[:20])}{' ...' if len(unsolved) > 20 else ''}")
    return CaptureResult(workload=workload, uncosted=lowered.uncosted, unsolved=unsolved, recording=base,
                         notes=notes)


def scenario_yaml(name: str, workload: str | Path, scenario: str | Path, hardware: list[str]) -> str:
    """A scenario that runs the captured workload as it is (its baseline) on `hardware`: what
    `kernelsim capture --scenario` writes, so `kernelsim run` predicts the model's step."""
    rel = os.path.relpath(Path(workload).resolve(), Path(scenario).resolve().parent)
    return yaml.safe_dump({"schema": "kernelsim.scenario/v1", "name": name, "workload": rel,
                           "hardware": list(hardware)}, sort_keys=False)


def _flow(value: Any) -> str:
    text: str = yaml.safe_dump(value, default_flow_style=True, width=1 << 30, sort_keys=False)
    return text.strip()


def dump_workload(workload: Mapping[str, Any], notes: list[str] | None = None) -> str:
    """The workload as YAML: one line per tensor and per op, the aten op in a trailing comment."""
    lines = [f"# {n}" for n in notes or []]
    for key in ("schema", "name", "kind", "description", "mode"):
        lines.append(f"{key}: {json.dumps(workload[key])}")
    lines.append(f"parameters: {_flow(workload['parameters'])}")
    lines.append("distribution:")
    lines.append("  buckets:")
    lines.extend(f"    - {_flow(b)}" for b in workload["distribution"]["buckets"])
    lines.append("tensors:")
    lines.extend(f"  {json.dumps(k)}: {_flow(v)}" for k, v in workload["tensors"].items())
    lines.append("ops:")
    for op in workload["ops"]:
        op = dict(op)
        aten = op.pop("aten", None)
        lines.append(f"  - {_flow(op)}" + (f"  # {aten}" if aten else ""))
    return "\n".join(lines) + "\n"
