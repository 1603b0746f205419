"""Error bands: how far a predicted step time or gain may be from a measurement, from validation.

`kernelsim validate --write-bands` turns the validated step-level errors into a band table
(validation/bands.yaml, schema `kernelsim.bands/v1`); `run`, `sweep`, `advise` and `serve`
read it and give every bucket time and every gain an interval.

A band is keyed by regime and shape split:
- regime: `host-bound` when the GPU sits idle for more than `host_bound_gpu_idle_share` of the
  simulated step (1 − kernel time / step time), else `gpu-bound`;
- shapes: `calibrated` when a kernel of the step sits exactly on a point of a calibrated
  correction table (the table then returns the measured ratio: the prediction there is a
  lookup, not a model), else `unseen`.

Bands are not keyed by validated family (scenario/variant): a user's scenario is none of them,
and 19 cases per key are needed for a 90 % interval.

Time bands hold order statistics (a distribution-free 90 % interval) of the signed error e = predicted / measured − 1; the measured time
then lies in [t / (1 + e_hi), t / (1 + e_lo)]. Gain bands hold the same interval of the gain error in
percentage points (predicted − measured), likewise: measured gains, not two time bands combined, because
a variant and its baseline share most kernels and their errors largely cancel.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from sim.costmodel import KernelCost
from sim.errors import InputError
from sim.graph import Graph, Op
from sim.hardware import Hardware
from sim.resources import shipped, shipped_root

BANDS_SCHEMA = "kernelsim.bands/v1"
DEFAULT_BANDS_FILE = shipped("validation/bands.yaml")  # the checkout's, or the installed copy
HOST_BOUND_GPU_IDLE_SHARE = 0.3  # default; the band file's own value wins
BAND_COVERAGE = 0.90
# A distribution-free 90 % prediction interval from n exchangeable errors is [x_(k), x_(n+1-k)]
# with k = floor(0.05 (n + 1)) >= 1: it needs n >= 19. A key with fewer falls back to a pooled one.
MIN_SAMPLES = 19
REGIMES = ("host-bound", "gpu-bound")
SPLITS = ("calibrated", "unseen")
ANY = "any"


# -- regime and shape split ----------------------------------------------------------------------


def gpu_idle_share(time_us: float, kernel_time_us: float) -> float:
    """Share of the step with no kernel running (kernel durations summed: overlap counts once each)."""
    if time_us <= 0:
        return 0.0
    return max(0.0, 1.0 - kernel_time_us / time_us)


def regime_of(time_us: float, kernel_time_us: float, threshold: float = HOST_BOUND_GPU_IDLE_SHARE) -> str:
    return "host-bound" if gpu_idle_share(time_us, kernel_time_us) > threshold else "gpu-bound"


@dataclass(frozen=True)
class CorrectionPoints:
    """The exact points of a profile's correction tables (built once per run and profile)."""

    gemm: frozenset[tuple[Any, ...]]
    tables: Mapping[str, frozenset[tuple[Any, ...]]]

    def holds(self, op: Op) -> bool:
        """The op's shape is exactly a point of one of the tables."""
        pt = op_point(op)
        if pt is None:
            return False
        return pt[1] in (self.gemm if pt[0] == "gemm" else self.tables.get(pt[0], frozenset()))


def correction_points(hw: Hardware) -> CorrectionPoints:
    return CorrectionPoints(
        gemm=frozenset((int(m), int(n), int(k), str(d)) for m, n, k, d, _ in hw.gemm_correction),
        tables={name: frozenset(tuple(float(v) for v in x) for x, _ in pts) for name, pts in hw.corrections.items()})


def op_point(op: Op) -> tuple[str, tuple[Any, ...]] | None:
    """The correction-table coordinates an op is priced at (table name, point), if any."""
    if op.kind == "gemm":
        return "gemm", (int(op.attrs["m"]), int(op.attrs["n"]), int(op.attrs["k"]), str(op.attrs.get("dtype", "bf16")))
    if op.kind == "attention" and int(op.attrs.get("seq_q", 0)) == 1 \
            and op.attrs.get("direction", "forward") == "forward":
        return "attention_decode", (float(int(op.attrs["batch"]) * int(op.attrs["heads"])), float(int(op.attrs["seq_kv"])))
    return None


def calibrated_kernel_share(graph: Graph, costs: Sequence[KernelCost | None], points: CorrectionPoints) -> float:
    """Share of the step's kernel time spent in kernels at an exact correction-table point."""
    total = hit = 0.0
    for op, cost in zip(graph.ops, costs, strict=True):
        if cost is None:
            continue
        total += cost.time_s
        if points.holds(op):
            hit += cost.time_s
    return hit / total if total > 0 else 0.0


def without_points(hw: Hardware, ops: Iterable[Op]) -> Hardware:
    """The profile with every correction-table point that one of `ops` sits on removed: what the
    model predicts for these shapes had they never been measured (leave-shape-out)."""
    gemm: set[tuple[Any, ...]] = set()
    other: dict[str, set[tuple[Any, ...]]] = {}
    for op in ops:
        pt = op_point(op)
        if pt is None:
            continue
        if pt[0] == "gemm":
            gemm.add(pt[1])
        else:
            other.setdefault(pt[0], set()).add(pt[1])
    return dataclasses.replace(
        hw,
        gemm_correction=tuple(p for p in hw.gemm_correction if (int(p[0]), int(p[1]), int(p[2]), str(p[3])) not in gemm),
        corrections={name: tuple(p for p in pts if tuple(float(v) for v in p[0]) not in other.get(name, set()))
                     for name, pts in hw.corrections.items()},
    )


# -- bands and their coverage -- ------------------------------------------------------------------


@dataclass(frozen=True)
class Sample:
    """One validated error: its band key and value (signed time error, or gain error in pp)."""

    regime: str
    split: str
    value: float
    group: str = ""  # the case it came from (leave-one-group-out coverage)
    label: str = ""  # the case × variant × bucket: its twin in the other split is left out with it


def band_keys(regime: str, split: str) -> list[tuple[str, str]]:
    """Lookup order: the exact key, pooled over splits, pooled over regimes, pooled over both."""
    return [(regime, split), (regime, ANY), (ANY, split), (ANY, ANY)]


def interval_of(values: Sequence[float], coverage: float = BAND_COVERAGE) -> tuple[float, float] | None:
    """[x_(k), x_(n+1-k)], k = floor((1 − coverage) / 2 · (n + 1)): a new error drawn like these
    falls inside with probability at least 1 − 2k / (n + 1); None when k would be 0."""
    s = sorted(values)
    k = math.floor((1.0 - coverage) / 2.0 * (len(s) + 1) + 1e-9)
    if k < 1:
        return None
    return s[k - 1], s[len(s) - k]


def fit_band(samples: Sequence[Sample], regime: str, split: str,
             coverage: float = BAND_COVERAGE) -> tuple[float, float, int, str] | None:
    """(lo, hi, n, key used) of the first key in lookup order with enough samples."""
    for r, s in band_keys(regime, split):
        vals = [x.value for x in samples if r in (ANY, x.regime) and s in (ANY, x.split)]
        band = interval_of(vals, coverage)
        if band is not None:
            return band[0], band[1], len(vals), f"{r}/{s}"
    return None


def time_interval(t_us: float, lo_err: float, hi_err: float) -> tuple[float, float]:
    """Where the measured time lies when the prediction's error e = t / measured − 1 is in [lo, hi]."""
    return t_us / (1.0 + hi_err), t_us / (1.0 + lo_err)


def gain_interval(gain: float, lo_pp: float, hi_pp: float) -> tuple[float, float]:
    """Where the measured gain lies when the predicted − measured error (pp) is in [lo, hi]."""
    return gain - hi_pp / 100.0, gain - lo_pp / 100.0


@dataclass(frozen=True)
class Coverage:
    n: int
    inside: int

    @property
    def share(self) -> float:
        return self.inside / self.n if self.n else float("nan")


def loo_coverage(samples: Sequence[Sample], split: str = "unseen", by_group: bool = False,
                 coverage: float = BAND_COVERAGE) -> Coverage:
    """How often a held-out error falls inside the band fitted without it, over the samples of
    `split`: leave-one-out (the sample and its twin of the same label in the other split); with
    `by_group`, its whole case is left out."""
    n = inside = 0
    for i, x in enumerate(samples):
        if x.split != split:
            continue
        rest = [y for j, y in enumerate(samples)
                if j != i and not (x.label and y.label == x.label) and not (by_group and y.group == x.group)]
        band = fit_band(rest, x.regime, x.split, coverage)
        if band is None:
            continue
        n += 1
        inside += band[0] <= x.value <= band[1]
    return Coverage(n, inside)


# -- the band file -------------------------------------------------------------------------------


def band_document(time_samples: Sequence[Sample], gain_samples: Sequence[Sample], profile: str,
                  idle_threshold: float, coverage: Mapping[str, Any]) -> dict[str, Any]:
    """The band table for every key (regime × split, pooled keys included), as written to YAML."""
    def table(samples: Sequence[Sample], unit: str) -> dict[str, Any]:
        out = {}
        for r in (*REGIMES, ANY):
            for s in (*SPLITS, ANY):
                vals = [x.value for x in samples if r in (ANY, x.regime) and s in (ANY, x.split)]
                band = interval_of(vals)
                if band is not None:
                    out[f"{r}/{s}"] = {"n": len(vals), f"lo_{unit}": round(band[0], 4), f"hi_{unit}": round(band[1], 4)}
        return out

    return {
        "schema": BANDS_SCHEMA,
        "profile": profile,
        "coverage_target": BAND_COVERAGE,
        "host_bound_gpu_idle_share": idle_threshold,
        "time_error": table(time_samples, "err"),
        "gain_error": table(gain_samples, "pp"),
        "coverage": dict(coverage),
    }


BAND_FILE_HEADER = """\
# Error bands of kernelsim's predictions, generated by `kernelsim validate --write-bands` from the
# step-level validation (docs/validation.md). Do not edit by hand: re-run the command.
# time_error: a distribution-free 90 % interval (order statistics) of predicted / measured − 1 of
# step times; gain_error: of predicted − measured gain in percentage points. Keys are regime/shapes
# ("any" pools); a key with too few cases for a 90 % interval (19) is absent and lookups fall back
# to a pooled key. coverage: how often a held-out case fell inside the band fitted without it.
"""


@dataclass(frozen=True)
class Bands:
    """A loaded band table."""

    profile: str
    idle_threshold: float
    time_error: Mapping[str, Mapping[str, float]]
    gain_error: Mapping[str, Mapping[str, float]]
    source: str

    def _lookup(self, table: Mapping[str, Mapping[str, float]], regime: str, split: str) -> Mapping[str, float] | None:
        for r, s in band_keys(regime, split):
            entry = table.get(f"{r}/{s}")
            if entry is not None:
                return entry
        return None

    def time(self, t_us: float, regime: str, split: str) -> tuple[float, float] | None:
        e = self._lookup(self.time_error, regime, split)
        return None if e is None else time_interval(t_us, e["lo_err"], e["hi_err"])

    def gain(self, g: float, regime: str, split: str) -> tuple[float, float] | None:
        e = self._lookup(self.gain_error, regime, split)
        return None if e is None else gain_interval(g, e["lo_pp"], e["hi_pp"])


def load_bands(path: Path | None = None) -> Bands | None:
    """The band table (default: validation/bands.yaml, shipped with kernelsim); None when absent."""
    p = path or DEFAULT_BANDS_FILE
    if not p.is_file():
        if path is not None:
            raise InputError("band file not found", file=str(p))
        return None
    st = p.stat()
    return _load_bands(p, st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=8)
def _load_bands(p: Path, mtime_ns: int, size: int) -> Bands:
    """Parsed once per file version: a sweep runs thousands of scenarios in one process."""
    try:
        doc = yaml.safe_load(p.read_text())
    except yaml.YAMLError as exc:
        raise InputError(f"cannot parse band file: {exc}", file=str(p)) from None
    if not isinstance(doc, dict) or doc.get("schema") != BANDS_SCHEMA:
        raise InputError("not a band file", file=str(p), path="schema",
                         value=doc.get("schema") if isinstance(doc, dict) else None, expected=BANDS_SCHEMA)
    for key in ("time_error", "gain_error"):
        if not isinstance(doc.get(key), dict):
            raise InputError("missing band table", file=str(p), path=key, expected="a mapping of regime/shapes → band")
    return Bands(profile=str(doc.get("profile")), idle_threshold=float(doc.get("host_bound_gpu_idle_share",
                 HOST_BOUND_GPU_IDLE_SHARE)), time_error=doc["time_error"], gain_error=doc["gain_error"],
                 source=_display_path(p))


def _display_path(p: Path) -> str:
    """The band file as results name it: relative to the repository when inside it (outputs must
    not depend on where the checkout lives)."""
    try:
        return p.resolve().relative_to(shipped_root()).as_posix()
    except ValueError:
        return str(p)


# -- annotating run results ----------------------------------------------------------------------


def _pair(x: tuple[float, float] | None) -> list[float] | None:
    return None if x is None else [x[0], x[1]]


def annotate_run(result: dict[str, Any], bands: Bands | None) -> None:
    """Add regime, intervals and the band's provenance to a `kernelsim.run` result, in place.

    Each bucket has `shapes` (set while simulating) and `kernel_time_us`. Per bucket:
    `regime`, `time_interval_us`, `gain_interval`; per variant: `weighted_time_interval_us`,
    `gain_interval`. Buckets' errors are taken as fully correlated (one model, one bias), so a
    weighted interval is the weighted mean of the buckets' offsets.
    """
    threshold = bands.idle_threshold if bands else HOST_BOUND_GPU_IDLE_SHARE
    for hw in result["hardware"]:
        hw["error_band"] = {"file": None if bands is None else bands.source,
                            "validated_profile": None if bands is None else bands.profile,
                            "same_profile": bands is not None and bands.profile == hw["name"],
                            "host_bound_gpu_idle_share": threshold}
        variants = hw["variants"]
        base = variants[0]["buckets"]
        for b in (bk for v in variants for bk in v["buckets"]):
            b["regime"] = regime_of(b["time_us"], b["kernel_time_us"], threshold)
        for v in variants:
            total_w = sum(b["weight"] for b in v["buckets"])
            t_lo = t_hi = 0.0
            g_lo = g_hi = 0.0
            base_w = sum(bb["weight"] * bb["time_us"] for bb in base)
            t_ok = g_ok = True
            for b, bb in zip(v["buckets"], base, strict=True):
                ti = bands.time(b["time_us"], b["regime"], b["shapes"]) if bands else None
                b["time_interval_us"] = _pair(ti)
                if v is variants[0] or b["time_us"] == bb["time_us"]:
                    # the baseline, or a bucket where the variant runs the baseline's step: no gain, no error
                    gi: tuple[float, float] | None = (b["gain_vs_baseline"], b["gain_vs_baseline"])
                else:
                    regime = "host-bound" if "host-bound" in (b["regime"], bb["regime"]) else "gpu-bound"
                    split = "calibrated" if b["shapes"] == bb["shapes"] == "calibrated" else "unseen"
                    gi = bands.gain(b["gain_vs_baseline"], regime, split) if bands else None
                b["gain_interval"] = _pair(gi)
                if ti is None:
                    t_ok = False
                else:
                    t_lo += b["weight"] * ti[0]
                    t_hi += b["weight"] * ti[1]
                if gi is None:
                    g_ok = False
                else:
                    share = b["weight"] * bb["time_us"] / base_w if base_w > 0 else 0.0
                    g_lo += share * (gi[0] - b["gain_vs_baseline"])
                    g_hi += share * (gi[1] - b["gain_vs_baseline"])
            v["weighted_time_interval_us"] = [t_lo / total_w, t_hi / total_w] if t_ok and total_w > 0 else None
            v["gain_interval"] = ([v["gain_vs_baseline"] + g_lo, v["gain_vs_baseline"] + g_hi]
                                  if g_ok else None)


def straddles_zero(interval: Sequence[float] | None) -> bool:
    return interval is not None and interval[0] < 0.0 < interval[1]


def fmt_gain(gain: float | None, interval: Sequence[float] | None) -> str:
    """`+1.5% [-0.8, +3.9]` (percent); the bare gain when there is no band."""
    if gain is None:
        return "—"
    text = f"{gain * 100:+.1f}%"
    if interval is not None:
        text += f" [{interval[0] * 100:+.1f}, {interval[1] * 100:+.1f}]"
    return text


def fmt_time(t_us: float, interval: Sequence[float] | None) -> str:
    """`123.4 [110.2, 140.0]` (µs); the bare time when there is no band."""
    text = f"{t_us:.1f}"
    if interval is not None:
        text += f" [{interval[0]:.1f}, {interval[1]:.1f}]"
    return text


def band_pct(interval: Sequence[float] | None) -> str:
    """A gain band as `[-0.8, +3.9]` (percent); `—` without a band."""
    return "—" if interval is None else f"[{interval[0] * 100:+.1f}, {interval[1] * 100:+.1f}]"


def band_us(interval: Sequence[float] | None) -> str:
    """A time band as `[432.4, 829.6]` (µs); `—` without a band."""
    return "—" if interval is None else f"[{interval[0]:.1f}, {interval[1]:.1f}]"


def band_note(hw: Mapping[str, Any]) -> str:
    """One line under a run table: where its bands come from, or that there are none."""
    band = hw.get("error_band") or {}
    if not band.get("file"):
        return "no error bands: validation/bands.yaml not found (kernelsim validate --write-bands)"
    note = "" if band.get("same_profile") else f"; validated on {band['validated_profile']}, not on this profile"
    return f"bands: 90 % interval of the measured value, from the errors kernelsim validate measured{note}"
