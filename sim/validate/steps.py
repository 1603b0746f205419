"""Step-level validation: shipped scenarios against their measured counterparts on a real GPU.

A cases file (validation/<gpu>/cases.yaml) maps each measurement file's runs to a scenario
variant and its bucket parameters. kernelsim runs the scenario on the measured profile at
exactly the measured shapes; rows compare step times, and gain rows compare each variant's
gain over the baseline (percentage points) with its sign and the ranking of variants.

Each case runs twice when it can: as shipped (split `calibrated`, when one of its kernels sits
exactly on a correction-table point, so the table returns that shape's measured ratio) and
with those points removed (split `unseen`: what the model says about shapes it never saw).
A case none of whose kernels hits a point runs once, as `unseen` — an unseen model.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sim.errors import InputError
from sim.hardware import sustained
from sim.run import Scenario, load_scenario, run_scenario
from sim.schema.workload import Bucket
from sim.validate.bands import (
    HOST_BOUND_GPU_IDLE_SHARE,
    calibrated_kernel_share,
    correction_points,
    regime_of,
    without_points,
)
from sim.validate.core import Row

CASES_SCHEMA = "kernelsim.validation-cases/v1"


@dataclass(frozen=True)
class GainRow:
    case: str
    bucket: str
    variant: str
    measured_gain: float
    predicted_gain: float
    split: str = "unseen"
    regime: str = ""

    @property
    def error_pp(self) -> float:
        return (self.predicted_gain - self.measured_gain) * 100

    @property
    def sign_ok(self) -> bool:
        return (self.measured_gain > 0) == (self.predicted_gain > 0)


@dataclass(frozen=True)
class RankRow:
    case: str
    bucket: str
    measured_order: tuple[str, ...]
    predicted_order: tuple[str, ...]

    measured_us: tuple[float, ...] = ()
    predicted_us: tuple[float, ...] = ()
    split: str = "unseen"

    def wrong_pairs(self, noise: float = 0.03) -> list[tuple[str, str]]:
        """Pairs the prediction orders differently from the measurement, among pairs whose measured
        times differ by more than `noise` (closer pairs are within run-to-run noise)."""
        meas = dict(zip(self.measured_order, self.measured_us, strict=True))
        pos = {v: i for i, v in enumerate(self.predicted_order)}
        wrong = []
        for i, a in enumerate(self.measured_order):
            for b in self.measured_order[i + 1:]:
                if meas[b] > meas[a] * (1 + noise) and pos[a] > pos[b]:
                    wrong.append((a, b))
        return wrong

    @property
    def ok(self) -> bool:
        return not self.wrong_pairs()


GEMM_NAMES = ("nvjet", "gemm", "cutlass", "splitkreduce", "memset")


def _is_gemm(name: str) -> bool:
    """GEMMs (and cuBLAS's split-K reductions and workspace memsets) in a profiled kernel list."""
    low = name.lower()
    return any(k in low for k in GEMM_NAMES)


def load_cases(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise InputError("validation cases file not found", file=str(path))
    from sim.schema.loader import read_yaml

    doc = read_yaml(path)
    if not isinstance(doc, dict) or doc.get("schema") != CASES_SCHEMA:
        raise InputError("not a validation cases file", file=str(path), path="schema",
                         value=(doc or {}).get("schema") if isinstance(doc, dict) else None, expected=CASES_SCHEMA)
    return doc


@dataclass(frozen=True)
class CaseInfo:
    """One validation case: how much of its kernel time sits on calibrated points."""

    case: str
    calibrated_kernel_share: float  # weighted over its runs, as shipped
    unseen_model: bool  # no kernel of it hits a correction-table point


@dataclass
class StepResults:
    rows: list[Row]
    gains: list[GainRow]
    ranks: list[RankRow]
    cases: list[CaseInfo]


def step_rows(cases_file: Path, profile: str | None = None,
              idle_threshold: float = HOST_BOUND_GPU_IDLE_SHARE) -> StepResults:
    doc = load_cases(cases_file)
    base = cases_file.parent
    prof = profile or doc["profile"]
    out = StepResults([], [], [], [])
    for case in doc["cases"]:
        mfile = base / case["measurements"]
        try:
            records = json.loads(mfile.read_text())["records"]
        except (OSError, json.JSONDecodeError, KeyError) as exc:
            raise InputError(f"cannot read measurements: {exc}", file=str(mfile)) from None
        scn = load_scenario(base / case["scenario"], [prof])
        if case.get("clock") == "sustained":  # measured after seconds of back-to-back steps
            if any(h.sustained_clock_hz is None for h in scn.hardware):
                continue  # a profile without a measured sustained clock cannot predict these
            scn = Scenario(spec=scn.spec, file=scn.file, workload=scn.workload,
                           hardware=tuple(sustained(h) for h in scn.hardware), buckets=scn.buckets)
        vmap: dict[str, str] = case["variants"]
        pmap: dict[str, str] = case["params"]
        measured: dict[tuple[tuple[tuple[str, float], ...], str], float] = {}
        measured_ew: dict[tuple[tuple[tuple[str, float], ...], str], float] = {}
        for rec in records:
            if rec.get("variant") not in vmap or "time_us" not in rec:
                continue
            key = tuple(sorted((p, float(rec[f])) for p, f in pmap.items()))
            measured[(key, vmap[rec["variant"]])] = float(rec["time_us"])
            kernels = (rec.get("profile") or {}).get("kernels") or []
            if kernels:
                measured_ew[(key, vmap[rec["variant"]])] = sum(
                    float(k["duration_us"]) for k in kernels if k.get("kind") == "kernel" and not _is_gemm(k["name"]))
        buckets = sorted({k for k, _ in measured})
        if not buckets:
            continue
        scn_b = Scenario(spec=scn.spec, file=scn.file, workload=scn.workload, hardware=scn.hardware,
                         buckets=tuple(Bucket(params=dict(b), weight=1.0) for b in buckets))
        label = scn.spec.name + ("@sustained" if case.get("clock") == "sustained" else "")
        result, traces = run_scenario(scn_b, keep_traces=True)
        hw = scn_b.hardware[0]
        ops = [op for tr in traces.values() for op in tr.graph.ops if op.is_kernel]
        points = correction_points(hw)
        hits = any(points.holds(op) for op in ops)
        shares = [calibrated_kernel_share(tr.graph, tr.costs, points) for tr in traces.values()]
        out.cases.append(CaseInfo(label, sum(shares) / len(shares) if shares else 0.0, not hits))
        runs = [("calibrated", result, traces)] if hits else [("unseen", result, traces)]
        if hits:
            scn_u = dataclasses.replace(scn_b, hardware=(without_points(hw, ops),))
            runs.append(("unseen", *run_scenario(scn_u, keep_traces=True)))
        for split, res, trs in runs:
            _compare(out, label, split, res, trs, buckets, measured, measured_ew, vmap, idle_threshold)
    return out


def _compare(out: StepResults, label: str, split: str, result: dict[str, Any], traces: dict[Any, Any],
             buckets: list[Any], measured: dict[Any, float], measured_ew: dict[Any, float], vmap: dict[str, str],
             idle_threshold: float) -> None:
    """Rows, gain rows and ranking rows of one run of one case."""
    hw_res = result["hardware"][0]
    for (_, vname, bi), trace in traces.items():
        m_ew = measured_ew.get((buckets[bi], vname))
        if not m_ew:
            continue
        p_ew = sum(c.time_s for c, o in zip(trace.costs, trace.graph.ops, strict=True)
                   if c is not None and o.kind != "gemm") * 1e6
        bname = hw_res["variants"][0]["buckets"][bi]["name"]
        out.rows.append(Row("kernels", f"{label}/{vname} non-GEMM kernels", f"{label} {vname} {bname} (non-GEMM kernels)",
                            split, m_ew, p_ew, group=label))
    regimes: dict[tuple[str, int], str] = {}
    for v in hw_res["variants"]:
        for bi, (b, bk) in enumerate(zip(v["buckets"], buckets, strict=True)):
            regimes[(v["name"], bi)] = regime_of(b["time_us"], b["kernel_time_us"], idle_threshold)
            m = measured.get((bk, v["name"]))
            if m is None:
                continue
            out.rows.append(Row("step", f"{label}/{v['name']}", f"{label} {v['name']} {b['name']}", split,
                                m, b["time_us"], regimes[(v["name"], bi)], label))
    base_name = "baseline"
    for bi, bk in enumerate(buckets):
        bname = hw_res["variants"][0]["buckets"][bi]["name"]
        t_base_m = measured.get((bk, base_name))
        pred = {v["name"]: v["buckets"][bi]["time_us"] for v in hw_res["variants"]}
        present = [vn for vn in vmap.values() if (bk, vn) in measured and vn in pred]
        if t_base_m is None:
            continue
        for vn in present:
            if vn == base_name:
                continue
            host = "host-bound" in (regimes[(vn, bi)], regimes[(base_name, bi)])
            out.gains.append(GainRow(label, bname, vn, 1 - measured[(bk, vn)] / t_base_m, 1 - pred[vn] / pred[base_name],
                                     split, "host-bound" if host else "gpu-bound"))
        if len(present) >= 2:
            order = tuple(sorted(present, key=lambda vn: measured[(bk, vn)]))
            out.ranks.append(RankRow(label, bname, order, tuple(sorted(present, key=lambda vn: pred[vn])),
                                     tuple(measured[(bk, vn)] for vn in order), split=split))


def gains_markdown(gains: list[GainRow], ranks: list[RankRow], noise: float = 0.03) -> str:
    lines = ["## Gains over the baseline (what-ifs)", "",
             "Gain = 1 − variant time / baseline time, per bucket. Error in percentage points. Shapes: `calibrated` "
             "is the profile as shipped, `unseen` the same case with its correction-table points removed; regime "
             "host-bound when the baseline or the variant is.", "",
             "| scenario | bucket | variant | shapes | regime | measured gain | predicted gain | error (pp) | sign |",
             "| --- | --- | --- | --- | --- | ---: | ---: | ---: | --- |"]
    for g in gains:
        sign = "ok" if g.sign_ok else ("wrong" if abs(g.measured_gain) > noise else "within noise")
        lines.append(f"| {g.case} | {g.bucket} | {g.variant} | {g.split} | {g.regime} | {g.measured_gain:+.1%} | "
                     f"{g.predicted_gain:+.1%} | {g.error_pp:+.1f} | {sign} |")
    lines += ["", f"## Ranking of variants per bucket (pairs measured more than {noise:.0%} apart)", "",
              "| scenario | bucket | shapes | measured order (fastest first) | predicted order | wrong pairs |",
              "| --- | --- | --- | --- | --- | --- |"]
    for r in ranks:
        wrong = ", ".join(f"{a} < {b}" for a, b in r.wrong_pairs(noise)) or "none"
        lines.append(f"| {r.case} | {r.bucket} | {r.split} | {', '.join(r.measured_order)} | "
                     f"{', '.join(r.predicted_order)} | {wrong} |")
    return "\n".join(lines) + "\n"
