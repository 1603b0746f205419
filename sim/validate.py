"""Validation: kernelsim's predictions against committed GPU measurements, as error tables.

- Kernel level: every calibration record the cost model can describe (sim.calibrate.cases),
  priced with the measured profile; split into the records a fit used and the held-out ones.
- Step level: the shipped workloads' real counterparts measured end to end
  (validation/<gpu>/*.json), simulated with the same profile (sim.validate_steps).

Thresholds live in a versioned YAML file; `check` returns the violations (the CLI exits 1).
"""

from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from sim.calibrate.cases import cases_from_raw
from sim.calibrate.fit import calibrate_from_raw
from sim.calibrate.raw import held_out, load_raw, record_id
from sim.errors import InputError
from sim.hardware import Hardware

THRESHOLDS_SCHEMA = "kernelsim.thresholds/v1"


@dataclass(frozen=True)
class Row:
    table: str  # "kernel" or "step"
    family: str
    label: str
    split: str  # "fit" | "held-out"
    measured_us: float
    predicted_us: float

    @property
    def error(self) -> float:
        return self.predicted_us / self.measured_us - 1.0


def kernel_rows(raw_dir: Path, hw: Hardware, base_profile: Path) -> list[Row]:
    """Predicted vs measured for every describable calibration record."""
    raw = load_raw(raw_dir)
    _, result = calibrate_from_raw(raw_dir, base_profile, raw_dir / "profile.yaml", "validation", spreads=False)
    used = result.used_ids()
    # Event-timed records hold the timing harness's own overhead on the machine that measured them
    # (2.9 us on the committed run, 5.5 us on another H200 VM): compare with that machine's.
    harness = next((f.value for f in result.values if f.key == "event_timing_overhead_us"), None)
    if isinstance(harness, float):
        hw = dataclasses.replace(hw, event_overhead_s=harness * 1e-6)
    groups = {g: list(raw.groups[g].records) for g in raw.groups}
    rows = []
    for case in cases_from_raw(groups):
        rid = record_id(case.record)
        split = "fit" if rid in used or (case.family == "gemm" and not held_out(case.record)) else "held-out"
        if case.measured_us <= 0:
            continue
        rows.append(Row("kernel", case.family, case.label, split, case.measured_us, case.predicted_us(hw)))
    return rows


@dataclass(frozen=True)
class Summary:
    table: str
    family: str
    split: str
    n: int
    median_abs: float
    p90_abs: float
    max_abs: float
    median_signed: float


def _quantile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    if not xs:
        return float("nan")
    pos = q * (len(xs) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def summarize(rows: list[Row]) -> list[Summary]:
    keys = sorted({(r.table, r.family, r.split) for r in rows})
    out = []
    for table, family, split in keys + sorted({(r.table, "all", r.split) for r in rows}):
        errs = [r.error for r in rows if r.table == table and r.split == split and (family == "all" or r.family == family)]
        if not errs:
            continue
        abs_errs = [abs(e) for e in errs]
        out.append(Summary(table, family, split, len(errs), statistics.median(abs_errs), _quantile(abs_errs, 0.9),
                           max(abs_errs), statistics.median(errs)))
    return out


def load_thresholds(path: Path) -> dict[str, Any]:
    doc = yaml.safe_load(path.read_text()) if path.is_file() else None
    if not isinstance(doc, dict) or doc.get("schema") != THRESHOLDS_SCHEMA:
        raise InputError("not a thresholds file", file=str(path), path="schema", value=(doc or {}).get("schema"),
                         expected=THRESHOLDS_SCHEMA)
    return doc


def check(summaries: list[Summary], thresholds: dict[str, Any]) -> list[str]:
    """Violations of `thresholds[table][family][split] = {median_abs, p90_abs, max_abs}`."""
    problems = []
    for s in summaries:
        limits = ((thresholds.get("tables") or {}).get(s.table) or {}).get(s.family, {}).get(s.split)
        if not limits:
            continue
        for key in ("median_abs", "p90_abs", "max_abs"):
            if key in limits and getattr(s, key) > float(limits[key]):
                problems.append(f"{s.table}/{s.family}/{s.split}: {key} {getattr(s, key):.3f} > {float(limits[key]):.3f}")
    return problems


def markdown(rows: list[Row], summaries: list[Summary], title: str) -> str:
    lines = [f"# {title}", "", "Errors are predicted / measured − 1; |error| statistics per family and split.", ""]
    for table in sorted({s.table for s in summaries}):
        lines += [f"## {table} level", "", "| family | split | n | median abs | p90 abs | max abs | median signed |",
                  "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
        for s in summaries:
            if s.table == table:
                lines.append(f"| {s.family} | {s.split} | {s.n} | {s.median_abs:.1%} | {s.p90_abs:.1%} | "
                             f"{s.max_abs:.1%} | {s.median_signed:+.1%} |")
        lines.append("")
    lines += ["## Every case", "", "| level | family | case | split | measured µs | predicted µs | error |",
              "| --- | --- | --- | --- | ---: | ---: | ---: |"]
    for r in rows:
        lines.append(f"| {r.table} | {r.family} | {r.label} | {r.split} | {r.measured_us:.2f} | {r.predicted_us:.2f} | "
                     f"{r.error:+.1%} |")
    return "\n".join(lines) + "\n"
