"""Validation: kernelsim's predictions against committed GPU measurements, as error tables.

- Kernel level: every calibration record the cost model can describe (sim.calibrate.cases),
  priced with the measured profile; split by shape, not by record: `calibrated` when the
  record's shape is the shape of a record some fit used, or a point of a correction table
  (where the table returns the measured ratio), `unseen` otherwise.
- Step level: the shipped workloads' real counterparts measured end to end
  (validation/<gpu>/*.json), simulated with the same profile (sim.validate.steps), once as
  shipped (`calibrated`, when a kernel of the case sits on a correction-table point) and once
  with those points removed (`unseen`: leave-shape-out).

Thresholds live in a versioned YAML file (`kernelsim.thresholds/v2`): every family and split
has a gate — accuracy `goal`s (reported when not met) and regression `tripwire`s (exceeding
one fails) — or an explicit `ungated: reason`. `check` returns what it found.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sim.calibrate.cases import cases_from_raw
from sim.calibrate.fit import calibrate_from_raw
from sim.calibrate.raw import load_raw, record_id
from sim.errors import InputError
from sim.hardware import Hardware
from sim.validate.bands import correction_points

THRESHOLDS_SCHEMA = "kernelsim.thresholds/v2"
SPLITS = ("calibrated", "unseen")
# Record fields that say what a kernel computes on (not how it is implemented or timed).
SHAPE_FIELDS = ("m", "n", "k", "dtype", "tf32", "numel", "bytes", "rows", "cols", "batch", "heads", "seq", "q_len",
                "head_dim", "kv_len", "causal", "tokens", "shape", "hidden", "src_dtype", "dst_dtype")


@dataclass(frozen=True)
class Row:
    table: str  # "kernel" or "step"
    family: str
    label: str
    split: str  # "calibrated" | "unseen"
    measured_us: float
    predicted_us: float
    regime: str = ""  # step rows: "host-bound" | "gpu-bound" (sim.validate.bands)
    group: str = ""  # the validation case a step row comes from

    @property
    def error(self) -> float:
        return self.predicted_us / self.measured_us - 1.0

# The raw group each kernel family's records come from (sim.calibrate.cases).
FAMILY_GROUP = {"fused_elementwise": "elementwise", "reduction_profiled": "kernel_configs", "gemm_cold": "l2_cold",
               "reduction_cold": "l2_cold", "copy_cold": "l2_cold", "copy_dirty": "l2_cold", "norm_cal": "l2_cold",
               "norm_bwd_cal": "l2_cold", "softmax_cal": "l2_cold", "norm_fallback_cal": "l2_cold",
               "rms_norm_bwd_cal": "l2_cold", "softmax_bwd_cal": "l2_cold"}
# Calibration families reported in a table of their own instead of "kernel": a raw part added after the kernel
# table's pooled gates (kernel/all/*) were set. Its rows are gated by their own groups; pooled into kernel/all they
# would move a pool whose median sits on 204 exact GEMM correction points (validation/thresholds.yaml says more).
FAMILY_TABLE = {"softmax_cal": "kernel_softmax", "norm_fallback_cal": "kernel_norm_fallback",
               "rms_norm_bwd_cal": "kernel_rms_norm_bwd", "softmax_bwd_cal": "kernel_softmax_bwd"}


def shape_key(rec: Mapping[str, Any]) -> str:
    """What a record computes on: its shape fields, not its implementation, launch or timing."""
    return json.dumps({k: rec.get(k) for k in SHAPE_FIELDS if k in rec}, sort_keys=True, default=str)


def _used_by_group(raw: Any, result: Any) -> set[tuple[str, str]]:
    """(raw group, record id) of every record a fit used. A record id names a record's inputs, not its
    group: l2_cold's copies share theirs with the copy group's event-timed copies of the same size, which
    no fit of the copy group used. A fitted value's records come from its raw file's group (a value
    without one, and the GEMM correction points, count in every group, as before)."""
    group_of_file = {grp.file: g for g, grp in raw.groups.items()}
    out: set[tuple[str, str]] = set()
    for f in result.values:
        owner = group_of_file.get(f.raw)
        out |= {(g, rid) for rid in f.used for g in ([owner] if owner else raw.groups)}
    out |= {(g, p["id"]) for p in result.gemm_correction for g in raw.groups}
    return out


def kernel_rows(raw_dir: Path, hw: Hardware, base_profile: Path) -> list[Row]:
    """Predicted vs measured for every describable calibration record, split by shape."""
    raw = load_raw(raw_dir)
    _, result = calibrate_from_raw(raw_dir, base_profile, raw_dir / "profile.yaml", "validation", spreads=False)
    used = _used_by_group(raw, result)
    # Event-timed records hold the timing harness's own overhead on the machine that measured them
    # (2.9 us on the committed run, 5.5 us on another H200 VM): compare with that machine's.
    harness = next((f.value for f in result.values if f.key == "event_timing_overhead_us"), None)
    if isinstance(harness, float):
        hw = dataclasses.replace(hw, event_overhead_s=harness * 1e-6)
    fitted_shapes = {(g, shape_key(r)) for g, grp in raw.groups.items() for r in grp.records if (g, record_id(r)) in used}
    groups = {g: list(raw.groups[g].records) for g in raw.groups}
    points = correction_points(hw)
    rows = []
    for case in cases_from_raw(groups):
        if case.measured_us <= 0:
            continue
        # a case is calibrated when a fit used its shape (in its raw group), its own record (a case built
        # from a rewritten record, e.g. l2_cold's sums), or a correction point it sits on
        group = FAMILY_GROUP.get(case.family, case.family)
        seen = (group, shape_key(case.record)) in fitted_shapes or (group, record_id(case.record)) in used or any(
            points.holds(op) for op in case.graph.ops if op.is_kernel)
        rows.append(Row(FAMILY_TABLE.get(case.family, "kernel"), case.family, case.label,
                        "calibrated" if seen else "unseen", case.measured_us,
                        case.predicted_us(hw)))
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
    from sim.schema.loader import read_yaml

    doc = read_yaml(path) if path.is_file() else None
    if not isinstance(doc, dict) or doc.get("schema") != THRESHOLDS_SCHEMA:
        raise InputError("not a thresholds file", file=str(path), path="schema",
                         value=doc.get("schema") if isinstance(doc, dict) else type(doc).__name__,
                         expected=THRESHOLDS_SCHEMA)
    if not isinstance(doc.get("gates"), dict):
        raise InputError("missing gates", file=str(path), path="gates", expected="a mapping of gate name → limits")
    if not doc["gates"]:
        # every validated group would lack its gate: say so before minutes of predicting (check() says
        # the same per group once the groups are known)
        raise InputError("no gate at all: every validated group would have no gate", file=str(path), path="gates",
                         value={}, expected="a goal/tripwire or `ungated: reason` for every group")
    return doc


def measured_quantities(summaries: list[Summary]) -> dict[str, dict[str, float]]:
    """Every gateable group (`table/family/split`) and its error statistics."""
    return {f"{s.table}/{s.family}/{s.split}": {"median_abs": s.median_abs, "p90_abs": s.p90_abs,
                                                "max_abs": s.max_abs, "n": float(s.n)} for s in summaries}


@dataclass
class GateReport:
    """What `check` found: tripwires exceeded fail validation; goals not met are reported."""

    tripwires_exceeded: list[str]
    goals_not_met: list[str]
    goals_met: list[str]
    ungated: list[tuple[str, str]]
    stale: list[str]
    # A profile other than the shipped one (sim.validate.fresh): the fresh limits fail instead of the
    # tripwires, which are only listed (they guard the shipped profile's own figures).
    policy: str = "shipped"  # "shipped" | "fresh"
    fresh_exceeded: list[str] = dataclasses.field(default_factory=list)
    shipped_tripwires_exceeded: list[str] = dataclasses.field(default_factory=list)
    fresh_checked: int = 0  # fresh limits compared

    @property
    def failed(self) -> bool:
        return bool(self.tripwires_exceeded or self.fresh_exceeded)


def _limit_holds(metric: str, value: float, limit: float) -> bool:
    return value >= limit if metric.startswith("min_") else value <= limit


def _metric_name(metric: str) -> str:
    return metric[4:] if metric.startswith("min_") else metric


def check(measured: Mapping[str, Mapping[str, float]], thresholds: Mapping[str, Any], file: str = "thresholds",
          fresh: Mapping[str, Mapping[str, float]] | None = None) -> GateReport:
    """Every measured group must have a gate: `goal` and/or `tripwire` limits, or `ungated: reason`.

    A limit named `min_X` is a floor on X; any other name is a ceiling. A group with no gate, a
    gate with neither limits nor a reason, or a limit on a quantity the group does not have is
    an input error (a gate that cannot fail is not a gate). With `fresh` (the limits for a profile
    other than the shipped one, sim.validate.fresh) those limits fail and the tripwires are listed only.
    """
    gates: Mapping[str, Any] = thresholds.get("gates") or {}
    missing = sorted(g for g in measured if g not in gates)
    if missing:
        raise InputError(f"{len(missing)} validated group(s) have no gate: " + "; ".join(missing), file=file,
                         path="gates", expected="a goal/tripwire or `ungated: reason` for every group")
    report = GateReport([], [], [], [], sorted(g for g in gates if g not in measured))
    for name in sorted(measured):
        gate = gates[name]
        where = f"gates.{name}"
        if not isinstance(gate, dict):
            raise InputError("a gate must be a mapping", file=file, path=where, value=gate,
                             expected="{goal: {...}, tripwire: {...}} or {ungated: reason}")
        unknown = set(gate) - {"goal", "tripwire", "ungated"}
        if unknown:
            raise InputError("unknown gate key", file=file, path=f"{where}.{sorted(unknown)[0]}",
                             expected="goal, tripwire or ungated")
        if "ungated" in gate:
            reason = gate["ungated"]
            if not isinstance(reason, str) or not reason.strip():
                raise InputError("an ungated group needs its reason", file=file, path=f"{where}.ungated", value=reason,
                                 expected="a sentence saying why it is not gated")
            if "goal" in gate or "tripwire" in gate:
                raise InputError("a gate is either limits or ungated", file=file, path=where,
                                 expected="goal/tripwire, or ungated, not both")
            report.ungated.append((name, reason.strip()))
            continue
        if "goal" not in gate and "tripwire" not in gate:
            raise InputError("a gate with no limit", file=file, path=where,
                             expected="goal and/or tripwire limits, or `ungated: reason`")
        for kind in ("tripwire", "goal"):
            limits = gate.get(kind) or {}
            if not isinstance(limits, dict):
                raise InputError("limits must be a mapping", file=file, path=f"{where}.{kind}", value=limits,
                                 expected="{median_abs: 0.05, ...}")
            for metric, limit in limits.items():
                qty = _metric_name(metric)
                if qty not in measured[name]:
                    raise InputError("a limit on a quantity this group does not have", file=file,
                                     path=f"{where}.{kind}.{metric}", expected="one of: " + ", ".join(sorted(measured[name])))
                if not isinstance(limit, int | float) or isinstance(limit, bool):
                    raise InputError("a limit must be a number", file=file, path=f"{where}.{kind}.{metric}", value=limit)
                value = measured[name][qty]
                rel = ">=" if metric.startswith("min_") else "<="
                line = f"{name}: {qty} {value:.3f} (limit {rel} {float(limit):.3f})"
                if _limit_holds(metric, value, float(limit)):
                    if kind == "goal":
                        report.goals_met.append(line)
                elif kind == "tripwire":
                    (report.tripwires_exceeded if fresh is None else report.shipped_tripwires_exceeded).append(line)
                else:
                    report.goals_not_met.append(line)
    if fresh is not None:
        from sim.validate.fresh import exceeded

        report.policy = "fresh"
        report.fresh_exceeded = exceeded(measured, fresh)
        report.fresh_checked = sum(1 for g, ms in fresh.items() if g in measured for m in ms
                                   if (m[4:] if m.startswith("min_") else m) in measured[g])
    return report


def markdown(rows: list[Row], summaries: list[Summary], title: str, report: GateReport | None = None,
             coverage: Mapping[str, Mapping[str, Any]] | None = None, cases: list[Any] | None = None) -> str:
    lines = [f"# {title}", "",
             "Generated by `kernelsim validate --markdown docs/validation.md`. Errors are predicted / measured − 1; "
             "|error| statistics per family and shape split.", "",
             "- **unseen** (the headline): kernel records whose shape no fit used and no correction table holds; "
             "step cases predicted with the correction-table points their kernels sit on removed (leave-shape-out).",
             "- **calibrated**: kernel records at a fitted shape or a correction-table point (there the table returns "
             "the measured ratio); step cases as shipped, when at least one kernel sits on such a point.", ""]
    if cases:
        lines += ["## Step cases: how much sits on calibrated points", "",
                  "| case | kernel time at correction-table points | unseen model |", "| --- | ---: | --- |"]
        for c in cases:
            lines.append(f"| {c.case} | {c.calibrated_kernel_share:.1%} | {'yes' if c.unseen_model else 'no'} |")
        if not any(c.unseen_model for c in cases):
            lines += ["", "No validated workload is an unseen model: each has kernels on correction-table points. "
                      "Its `unseen` rows are the leave-shape-out prediction (those points removed), the closest "
                      "stand-in for a model no fit touched."]
        lines.append("")
    for table in sorted({s.table for s in summaries}):
        lines += [f"## {table} level", "",
                  "| family | unseen n | unseen median | unseen p90 | unseen max | calibrated n | calibrated median | "
                  "calibrated p90 | calibrated max |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        fams = list(dict.fromkeys(s.family for s in summaries if s.table == table))
        by = {(s.family, s.split): s for s in summaries if s.table == table}
        for fam in fams:
            cells = []
            for split in ("unseen", "calibrated"):
                s = by.get((fam, split))
                cells += ["—"] * 4 if s is None else [str(s.n), f"{s.median_abs:.1%}", f"{s.p90_abs:.1%}", f"{s.max_abs:.1%}"]
            lines.append(f"| {fam} | " + " | ".join(cells) + " |")
        lines.append("")
    if coverage:
        lines += ["## Band coverage (unseen shapes)", "",
                  "`kernelsim validate --write-bands` turns the step rows into validation/bands.yaml: per regime "
                  "(host-bound when the simulated GPU is idle for more than the band file's share of the step) and "
                  "shapes, a distribution-free 90 % interval (order statistics; 19 cases at least, else a pooled key) "
                  "of the step-time error and of the gain error in pp. `run`, `sweep`, `advise` and `serve` put it "
                  "on every bucket time and gain (docs/json.md).", "",
                  "How often the measured value fell inside the 90 % band fitted without that case (leave one out: the "
                  "row and its calibrated twin; leave case out: every row of the same workload — the bands are fitted "
                  "on four workloads, and a fifth unlike them is the harder test).", "",
                  "| band | method | inside | n | coverage |", "| --- | --- | ---: | ---: | ---: |"]
        for key, c in coverage.items():
            kind, how = key.split("/")
            share = "—" if not c["n"] else f"{c['inside'] / c['n']:.0%}"
            lines.append(f"| {kind} | {how.replace('_', ' ')} | {c['inside']} | {c['n']} | {share} |")
        lines.append("")
    if report is not None:
        lines += ["## Gates (validation/thresholds.yaml)", "",
                  "Tripwires (today's value plus a margin) fail `validate`; goals (what we aim for) are reported.", ""]
        lines += [f"- tripwire exceeded: {x}" for x in report.tripwires_exceeded]
        lines += [f"- goal not met: {x}" for x in report.goals_not_met]
        lines += [f"- goal met: {x}" for x in report.goals_met]
        lines += [f"- ungated: {n}: {r}" for n, r in report.ungated]
        lines.append("")
    lines += ["## Every case", "", "| level | family | case | shapes | regime | measured µs | predicted µs | error |",
              "| --- | --- | --- | --- | --- | ---: | ---: | ---: |"]
    for r in rows:
        lines.append(f"| {r.table} | {r.family} | {r.label} | {r.split} | {r.regime or '—'} | {r.measured_us:.2f} | "
                     f"{r.predicted_us:.2f} | {r.error:+.1%} |")
    return "\n".join(lines) + "\n"
