"""Sweep plans: read a scenario's `sweep:` axes, expand the grid, and name every point by a hash of its inputs."""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from sim.errors import InputError
from sim.hardware import Hardware, load_profile
from sim.run import Scenario, inline_choose, load_scenario, with_parameters
from sim.schema.scenario import SweepSpec
from sim.version import __version__

POINT_SCHEMA = "kernelsim.sweep-point/v1"
SWEEP_SCHEMA = "kernelsim.sweep/v1"


@dataclass(frozen=True)
class Point:
    """One grid point: a hardware profile and values of the parameter axes."""

    index: int
    hardware: str  # the profile's name as written on the axis
    params: tuple[tuple[str, float | int], ...]
    key: str  # hash of everything the point's result depends on

    def as_dict(self) -> dict[str, Any]:
        return {"index": self.index, "hardware": self.hardware, "params": dict(self.params), "key": self.key}


@dataclass(frozen=True)
class SweepPlan:
    """A loaded scenario, its axes, and the expanded grid (hardware outermost, then params in file order)."""

    scenario: Scenario
    file: Path
    text: str  # the scenario file as written (for reports)
    hardware: dict[str, Hardware]  # axis name → profile
    param_axes: dict[str, list[float | int]]
    variants: tuple[str, ...]  # the variants every point simulates, besides the baseline
    points: tuple[Point, ...]

    @property
    def axes(self) -> dict[str, list[Any]]:
        return {"hardware": list(self.hardware), **self.param_axes}


@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """A hash of kernelsim's own source and band table: a cached point is stale once the model changes."""
    root = Path(__file__).resolve().parent.parent
    h = hashlib.sha256(__version__.encode())
    for f in sorted(root.rglob("*.py")):
        rel = f.relative_to(root).as_posix()
        if rel.startswith(("calibrate/gpu/", "sweep/", "report/")) and "metrics" not in rel:
            continue  # measurement drivers, the sweep machinery and renderers do not change results
        h.update(rel.encode())
        h.update(f.read_bytes())
    from sim.validate.bands import DEFAULT_BANDS_FILE  # the error bands every result carries

    if DEFAULT_BANDS_FILE.is_file():
        h.update(DEFAULT_BANDS_FILE.read_bytes())
    return h.hexdigest()


def _point_key(scn: Scenario, hw: Hardware, params: dict[str, float | int], variants: tuple[str, ...]) -> str:
    payload = {
        "code": code_fingerprint(),
        "scenario": scn.spec.model_dump(mode="json", by_alias=True, exclude={"sweep"}),
        "workload": scn.workload.spec.model_dump(mode="json", by_alias=True),
        "hardware": {k: v for k, v in dataclasses.asdict(hw).items() if k != "source_file"},
        "params": params,
        "variants": list(variants),
    }
    text = json.dumps(payload, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def load_sweep(path: Path) -> SweepPlan:
    """Load a scenario and expand its `sweep:` section (absent: one point per scenario profile)."""
    scn = load_scenario(path)
    spec = scn.spec.sweep or SweepSpec()
    file = str(path)
    base = path.parent
    hw_names = spec.hardware if spec.hardware is not None else list(scn.spec.hardware)
    if len(set(hw_names)) != len(hw_names):
        raise InputError("a hardware profile is listed twice", file=file, path="sweep.hardware", value=hw_names)
    where = "sweep.hardware" if spec.hardware is not None else "hardware"
    hardware = {h: load_profile(h, base, file=file, path=f"{where}[{i}]") for i, h in enumerate(hw_names)}
    declared = set(scn.workload.spec.parameters)
    for name in spec.params:
        if name not in declared:
            raise InputError(
                "sweep axis names an unknown parameter", file=file, path=f"sweep.params.{name}", value=name,
                expected="a workload parameter or a scenario knob under 'parameters': " + ", ".join(sorted(declared)),
            )
    known = [v.name for v in scn.spec.variants]
    if spec.variants is None:
        variants = tuple(known)
    else:
        for i, name in enumerate(spec.variants):
            if name not in known:
                raise InputError("unknown variant", file=file, path=f"sweep.variants[{i}]", value=name,
                                 expected="one of: " + ", ".join(known))
        variants = tuple(dict.fromkeys(spec.variants))
    axes = dict(spec.params)
    points = []
    for index, combo in enumerate(itertools.product(hw_names, itertools.product(*axes.values()))):
        h, values = combo
        params: dict[str, float | int] = dict(zip(axes, values, strict=True))
        key = _point_key(scn, hardware[h], params, variants)
        points.append(Point(index=index, hardware=h, params=tuple(params.items()), key=key))
    return SweepPlan(scenario=scn, file=path, text=path.read_text(encoding="utf-8"), hardware=hardware,
                     param_axes=axes, variants=variants, points=tuple(points))


def point_scenario(scn: Scenario, hw: Hardware, params: dict[str, float | int], variants: tuple[str, ...]) -> Scenario:
    """The scenario of one point: one profile, swept values replacing parameters everywhere, chosen variants."""
    workload = with_parameters(scn.workload, params) if params else scn.workload
    buckets = tuple(
        b.model_copy(update={"params": {**b.params, **{k: v for k, v in params.items() if k in b.params}}})
        for b in scn.buckets
    )
    spec = scn.spec
    if tuple(v.name for v in spec.variants) != variants:
        spec = inline_choose(spec)  # a chosen `choose` variant keeps candidates left out of the point
        spec = spec.model_copy(update={"variants": [v for v in spec.variants if v.name in variants]})
    return dataclasses.replace(scn, spec=spec, workload=workload, hardware=(hw,), buckets=buckets)
