"""The public Python API: what the command line does, returning typed results a notebook can use.

    from sim import api
    result = api.run("scenarios/bias_gelu_dropout.yaml", hardware=["h200-measured"])
    result.variant("compiled").gain_vs_baseline      # weighted end-to-end gain (0.015 = +1.5 %)
    result.to_dataframe()                            # one row per hardware × variant × bucket (pandas)
    result.to_dict()                                 # the JSON document (schema kernelsim.run/v1)

Every function accepts a `str` or a `Path`; bad input raises `sim.errors.InputError` with the file,
the key path and the value. The typed results read the JSON document; `to_dict()` returns all of it
(fields added later are kept there even before a typed attribute exists for them).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from sim.hardware import Hardware
    from sim.run import Scenario
    from sim.trace import Trace

PathLike = str | os.PathLike[str]

__all__ = ["AdviceResult", "BucketResult", "HardwareResult", "ReplayResult", "RunResult", "SweepResult",
           "VariantResult", "advise", "load_scenario", "replay", "run", "sweep"]


def _dataframe(rows: list[dict[str, Any]]) -> Any:
    try:
        import pandas as pd
    except ImportError:
        raise ImportError("to_dataframe() needs pandas: pip install pandas (to_records() gives the same rows "
                          "as dicts)") from None
    return pd.DataFrame(rows)


class _Named(Protocol):
    @property
    def name(self) -> str: ...


N = TypeVar("N", bound=_Named)


def _by_name(items: Sequence[N], name: str, what: str) -> N:
    """The item called `name`; a KeyError that lists the names there are."""
    for x in items:
        if x.name == name:
            return x
    raise KeyError(f"no {what} {name!r}; {what}s: {', '.join(x.name for x in items)}")


def _scalars(d: dict[str, Any]) -> dict[str, Any]:
    """The fields of a JSON object that are not objects or lists (one flat record)."""
    return {k: x for k, x in d.items() if not isinstance(x, dict | list)}


class _Document:
    """What every result offers: its JSON document, and its rows as dicts or as a pandas DataFrame."""

    document: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        """The JSON document the command line writes with --json."""
        return self.document

    def to_records(self) -> list[dict[str, Any]]:
        raise NotImplementedError

    def to_dataframe(self) -> Any:
        """A pandas DataFrame of to_records()'s rows (needs pandas)."""
        return _dataframe(self.to_records())


@dataclass(frozen=True)
class BucketResult:
    """One variant on one shape bucket: predicted step time and where it goes."""

    name: str
    params: dict[str, float]
    weight: float
    time_us: float
    gain_vs_baseline: float | None
    breakdown_us: dict[str, float]
    dominant: str
    kernels: int
    hbm_bytes: float
    path: str  # baseline | variant | fast | fallback: the dispatch path taken in this bucket

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> BucketResult:
        return cls(name=d["name"], params=dict(d["params"]), weight=d["weight"], time_us=d["time_us"],
                   gain_vs_baseline=d.get("gain_vs_baseline"), breakdown_us=dict(d["breakdown_us"]),
                   dominant=d["dominant"], kernels=d["kernels"], hbm_bytes=d["hbm_bytes"], path=d["path"])


@dataclass(frozen=True)
class VariantResult:
    """One variant on one hardware profile, weighted over the bucket distribution."""

    name: str
    weighted_time_us: float
    gain_vs_baseline: float | None
    kernel_only_gain: float | None  # the replaced kernels vs the new ones alone (the microbenchmark view)
    coverage: float
    fallback_rate: float
    buckets: tuple[BucketResult, ...]

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> VariantResult:
        return cls(name=d["name"], weighted_time_us=d["weighted_time_us"], gain_vs_baseline=d.get("gain_vs_baseline"),
                   kernel_only_gain=(d.get("micro") or {}).get("gain"), coverage=d["coverage"],
                   fallback_rate=d["fallback_rate"], buckets=tuple(BucketResult.from_dict(b) for b in d["buckets"]))

    def bucket(self, name: str) -> BucketResult:
        """The bucket called `name` (e.g. "tokens=4096")."""
        return _by_name(self.buckets, name, "bucket")


@dataclass(frozen=True)
class HardwareResult:
    """Every variant on one hardware profile."""

    name: str
    gpu: str
    measured: bool
    variants: tuple[VariantResult, ...]

    def variant(self, name: str) -> VariantResult:
        return _by_name(self.variants, name, "variant")


@dataclass(frozen=True)
class RunResult(_Document):
    """The result of `run`: per hardware profile, variant and bucket (the JSON of `kernelsim run --json`)."""

    scenario: str
    workload: str
    hardware: tuple[HardwareResult, ...]
    document: dict[str, Any] = field(repr=False)
    traces: dict[tuple[str, str, int], Trace] = field(default_factory=dict, repr=False)

    @classmethod
    def from_dict(cls, doc: dict[str, Any], traces: dict[tuple[str, str, int], Trace] | None = None) -> RunResult:
        hws = tuple(HardwareResult(name=h["name"], gpu=h["gpu"], measured=h["measured"],
                                   variants=tuple(VariantResult.from_dict(v) for v in h["variants"]))
                    for h in doc["hardware"])
        return cls(scenario=doc["scenario"], workload=doc["workload"], hardware=hws, document=doc,
                   traces=traces or {})

    def profile(self, name: str | None = None) -> HardwareResult:
        """The results on hardware profile `name` (default: the only, or first, profile)."""
        if name is None:
            return self.hardware[0]
        return _by_name(self.hardware, name, "hardware profile")

    def variant(self, name: str, hardware: str | None = None) -> VariantResult:
        """Variant `name` on `hardware` (default: the first profile)."""
        return self.profile(hardware).variant(name)

    def to_records(self) -> list[dict[str, Any]]:
        """One flat dict per hardware × variant × bucket (what to_dataframe() tabulates)."""
        rows = []
        for h in self.hardware:
            for v in h.variants:
                for b in v.buckets:
                    rows.append({"hardware": h.name, "variant": v.name, "bucket": b.name, **b.params,
                                 "weight": b.weight, "time_us": b.time_us, "gain_vs_baseline": b.gain_vs_baseline,
                                 **{f"{k}_us": x for k, x in b.breakdown_us.items()}, "dominant": b.dominant,
                                 "kernels": b.kernels, "hbm_bytes": b.hbm_bytes, "path": b.path})
        return rows

    def summary_records(self) -> list[dict[str, Any]]:
        """One flat dict per hardware × variant, weighted over the buckets."""
        return [{"hardware": h.name, "variant": v.name, "weighted_time_us": v.weighted_time_us,
                 "gain_vs_baseline": v.gain_vs_baseline, "kernel_only_gain": v.kernel_only_gain,
                 "coverage": v.coverage, "fallback_rate": v.fallback_rate}
                for h in self.hardware for v in h.variants]

    def summary_dataframe(self) -> Any:
        """A pandas DataFrame, one row per hardware × variant (needs pandas)."""
        return _dataframe(self.summary_records())


@dataclass(frozen=True)
class SweepResult(_Document):
    """The result of `sweep`: the tidy table (one row per point × variant × bucket) and the summary."""

    rows: list[dict[str, Any]]
    summary: dict[str, Any]
    files: list[Path]
    points: list[dict[str, Any]] = field(repr=False)

    @property
    def document(self) -> dict[str, Any]:  # type: ignore[override]
        return {"summary": self.summary, "rows": self.rows, "files": [str(f) for f in self.files]}

    def to_records(self) -> list[dict[str, Any]]:
        """The tidy table: the rows of results.csv."""
        return list(self.rows)


@dataclass(frozen=True)
class AdviceResult(_Document):
    """The result of `advise` (schema kernelsim.advice/v1, docs/advise.md)."""

    document: dict[str, Any] = field(repr=False)

    @property
    def recommendations(self) -> dict[str, str]:
        """Hardware profile → the recommended plan in words."""
        return {h["name"]: (h.get("recommendation") or {}).get("text", "") for h in self.document["hardware"]}

    def to_records(self) -> list[dict[str, Any]]:
        """One dict per hardware × variant: the decision and its figures."""
        return [{"hardware": h["name"], **_scalars(v), **_scalars(v.get("figures") or {})}
                for h in self.document["hardware"] for v in h["variants"]]


@dataclass(frozen=True)
class ReplayResult(_Document):
    """The result of `replay` (schema kernelsim.replay/v1, docs/traces.md) and the simulated trace."""

    document: dict[str, Any] = field(repr=False)
    trace: Trace = field(repr=False)

    @property
    def predicted_time_us(self) -> float | None:
        v = self.document.get("predicted_time_us")
        return None if v is None else float(v)

    @property
    def measured_time_us(self) -> float | None:
        v = self.document.get("measured_time_us")
        return None if v is None else float(v)

    def to_records(self) -> list[dict[str, Any]]:
        """One dict: the step's scalar fields."""
        return [_scalars(self.document)]


def load_scenario(path: PathLike, hardware: Sequence[str] | None = None) -> Scenario:
    """Load and check a scenario file (and its workload and profiles); `hardware` replaces its list."""
    from sim.run import load_scenario as _load

    return _load(Path(path), list(hardware) if hardware else None)


def run(scenario: PathLike | Scenario, hardware: Sequence[str] | None = None, *,
        keep_traces: bool = False) -> RunResult:
    """Simulate every variant × bucket × hardware profile (`kernelsim run`)."""
    from sim.run import Scenario, run_scenario

    scn = scenario if isinstance(scenario, Scenario) else load_scenario(scenario, hardware)
    doc, traces = run_scenario(scn, keep_traces=keep_traces)
    return RunResult.from_dict(doc, traces)


def sweep(scenario: PathLike, out: PathLike | None = None, *, workers: int | None = None,
          executor: str = "local", resume: bool = False, progress: bool = False) -> SweepResult:
    """Run a scenario's sweep grid (`kernelsim sweep`); files go to `out` (default ./sweep_<name>)."""
    from sim.sweep import load_sweep, run_sweep

    plan = load_sweep(Path(scenario))
    folder = Path(out) if out is not None else Path(f"sweep_{plan.scenario.spec.name}")
    outcome = run_sweep(plan, folder, workers=workers, executor=executor, resume=resume, progress=progress)
    return SweepResult(rows=outcome.rows, summary=outcome.summary, files=list(outcome.files),
                       points=outcome.records)


def advise(scenario: PathLike, hardware: Sequence[str] | None = None) -> AdviceResult:
    """Simulate and decide per variant and hardware: fuse, specialize, dispatch, keep, don't write."""
    from sim.advise import advise as _advise

    return AdviceResult(_advise(Path(scenario), list(hardware) if hardware else None))


def replay(trace: PathLike, hardware: str | Hardware, *, mode: str = "measured",
           step: str | None = None, host: str = "trace", keep_profiler: bool = False,
           unprofiled_us: float | None = None) -> ReplayResult:
    """Replay one step of a PyTorch profiler trace: its own durations (measured) or the cost model (predict).
    In predict mode `host` is "trace" (the trace's host timeline less the profiler's cost, or with it
    when `keep_profiler`) or "model" (the profile's host costs); docs/traces.md."""
    from sim.hardware import Hardware, load_profile
    from sim.replay import replay as _replay

    hw = hardware if isinstance(hardware, Hardware) else load_profile(hardware, Path.cwd(), path="hardware")
    doc, sim_trace = _replay(Path(trace), hw, mode, step, host=host, keep_profiler=keep_profiler,
                             unprofiled_us=unprofiled_us)
    return ReplayResult(doc, sim_trace)
