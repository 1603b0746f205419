"""Loading a scenario: its workload (with the scenario's parameter values), hardware profiles,
buckets, and the load-time checks (math op names, every variant applies to every bucket)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sim.errors import InputError
from sim.hardware import Hardware, load_profile, sustained
from sim.run.variants import variant_graph
from sim.schema.loader import load_yaml_model
from sim.schema.scenario import ScenarioFile
from sim.schema.workload import Bucket
from sim.workload import Workload, flat_ops, load_workload


@dataclass(frozen=True)
class Scenario:
    """A loaded scenario: its file, the workload with the scenario's parameters, the profiles and buckets."""

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
