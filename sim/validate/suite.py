"""The whole offline validation in one call: every table's rows (kernels, steps, host time, the
second wave), their summaries, the gains and rankings, band coverage, the thresholds check and the
`kernelsim.validation/v2` JSON document. The `validate` command renders it; the reproduction
check (sim.calibrate.repro) reads its document."""

from __future__ import annotations

import dataclasses
import json
import statistics
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sim.hardware import Hardware, load_profile, resolve_profile
from sim.validate.bands import HOST_BOUND_GPU_IDLE_SHARE, Sample, load_bands, loo_coverage
from sim.validate.comm import contention_quantities
from sim.validate.core import (
    GateReport,
    Row,
    Summary,
    check,
    kernel_rows,
    load_thresholds,
    measured_quantities,
    summarize,
)
from sim.validate.fused_configs import (
    ConfigGain,
    ConfigRank,
    ExcludedBucket,
    config_gains,
    config_quantities,
    excluded_buckets,
    fused_config_times,
)
from sim.validate.host import (
    gain_groups,
    heldout_machine_rows,
    host_rows,
    own_speed_gains,
    own_speed_rows,
)
from sim.validate.steps import GainRow, StepResults, step_rows
from sim.validate.wave2 import contention_validation, wave2_rows


@dataclass
class Validation:
    """Everything `kernelsim validate` reports."""

    hw: Hardware
    idle: float  # the host-bound GPU-idle threshold the step rows were split with
    rows: list[Row]
    steps: StepResults
    host_gains: list[GainRow]
    summaries: list[Summary]
    measured: dict[str, dict[str, float]]
    gain_stats: dict[str, tuple[int, float, int]]  # split -> (pairs, median |error| pp, sign wrong)
    time_samples: list[Sample]
    gain_samples: list[Sample]
    coverage: dict[str, Any]
    report: GateReport
    slowdowns: Any  # the contention validation's rows (sim.validate.wave2.contention_validation)
    machine_gains: list[GainRow] = dataclasses.field(default_factory=list)  # host gains on machines held out by machine
    config_gains: list[ConfigGain] = dataclasses.field(default_factory=list)  # fused block-size configs (held out)
    config_ranks: list[ConfigRank] = dataclasses.field(default_factory=list)
    config_excluded: list[ExcludedBucket] = dataclasses.field(default_factory=list)  # bad measurements left out


def _quiet(text: str) -> AbstractContextManager[Any]:
    return nullcontext()


def is_tripwire_profile(profile: str, thresholds: dict[str, Any]) -> bool:
    """Whether `profile` is the one the tripwires were set on (the thresholds file's `tripwire_profile`,
    compared byte for byte: a refit under the same name is another profile). A thresholds file without
    the key gates every profile with its tripwires."""
    ref = thresholds.get("tripwire_profile")
    if ref is None:
        return True
    mine = resolve_profile(profile, Path.cwd(), path="--profile")
    return mine.read_bytes() == resolve_profile(str(ref), Path.cwd(), path="tripwire_profile").read_bytes()


def run_validation(profile: str, base: str, raw: Path, cases: Path, thresholds_path: Path,
                   busy: Callable[[str], AbstractContextManager[Any]] = _quiet) -> Validation:
    """Validate profile `profile` (over `base`) against the committed measurements under `raw` and `cases`;
    `busy` shows progress while every measured kernel, step and collective is predicted (the command's spinner)."""
    thresholds = load_thresholds(thresholds_path)
    current = load_bands()
    idle = current.idle_threshold if current else HOST_BOUND_GPU_IDLE_SHARE
    hw = load_profile(profile, Path.cwd(), path="--profile")
    base_path = resolve_profile(base, Path.cwd(), path="--base")
    with busy("validating: predicting every measured kernel, step and collective"):
        rows = kernel_rows(raw, hw, base_path)
        steps = step_rows(cases, profile, idle)
        rows += steps.rows
        # issue 15: host time in real models; the configs the host fit may use are "calibrated"
        hrows, hgains = host_rows(raw.parent / "host_context", hw)
        rows += [dataclasses.replace(r, split="calibrated" if r.split == "fit" else "unseen") for r in hrows]
        # the same steps on a machine held out by machine (never fitted; validation/h200/machine_F)
        mrows, mgains = heldout_machine_rows(raw.parent.parent.parent, hw)
        rows += mrows
        # --host model at each clocked step's own host speed (the held-out machines' steps with a host clock)
        rows += own_speed_rows(raw.parent.parent.parent, hw)
        # ... and their gains, each step of a pair at its own speed (host_gains/own_speed/<variant>/<machine split>)
        mgains += own_speed_gains(raw.parent.parent.parent, hw)
        # second measurement wave: held-out kernels (issue 18) and collectives on two GPUs (issue 20)
        rows += wave2_rows(hw, raw.parent.parent.parent)
        # issue 18: the fused kernel's block-size configs — micro gains and ranking per bucket
        cgains, cranks = config_gains(fused_config_times(hw, raw.parent.parent.parent))
        cexcluded = excluded_buckets(raw.parent.parent.parent)
    gains, ranks = steps.gains, steps.ranks
    summaries = summarize(rows)
    measured = measured_quantities(summaries)
    gain_stats: dict[str, tuple[int, float, int]] = {}
    for split in ("calibrated", "unseen"):
        errs = [abs(g.error_pp) for g in gains if g.split == split]
        if errs:
            wrong = sum(1 for g in gains if g.split == split and not g.sign_ok and abs(g.measured_gain) > 0.03)
            gain_stats[split] = (len(errs), statistics.median(errs), wrong)
            measured[f"gains/{split}"] = {"median_abs_pp": statistics.median(errs), "max_abs_pp": max(errs),
                                          "sign_wrong": float(wrong), "n": float(len(errs))}
        rk = [r for r in ranks if r.split == split]
        if rk:
            measured[f"ranking/{split}"] = {"wrong_buckets": float(sum(1 for r in rk if not r.ok)), "n": float(len(rk))}
    for key, grp in gain_groups(hgains).items():
        errs = [abs(g.error_pp) for g in grp]
        measured[f"host_gains/{key}"] = {"median_abs_pp": statistics.median(errs), "n": float(len(errs))}
    for msplit in sorted({g.split for g in mgains}):  # HELDOUT_MACHINE, or a machine's own (MACHINE_SPLITS)
        for key, grp in gain_groups([g for g in mgains if g.split == msplit]).items():
            errs = [abs(g.error_pp) for g in grp]
            measured[f"host_gains/{key}/{msplit}"] = {"median_abs_pp": statistics.median(errs), "n": float(len(errs))}
    measured.update(config_quantities(cgains, cranks))
    # issue 20: slowdowns of a load and all-reduces on two streams of two GPUs, in percentage points
    slowdowns = contention_validation(raw.parent.parent.parent)
    measured.update(contention_quantities(slowdowns))
    time_samples = [Sample(r.regime, r.split, r.error, r.group, r.label) for r in rows if r.table == "step"]
    gain_samples = [Sample(g.regime, g.split, g.error_pp, g.case, f"{g.case} {g.variant} {g.bucket}") for g in gains]
    coverage: dict[str, Any] = {}
    for kind, samples in (("time", time_samples), ("gain", gain_samples)):
        for how, by_group in (("leave_one_out", False), ("leave_case_out", True)):
            c = loo_coverage(samples, "unseen", by_group=by_group)
            coverage[f"{kind}/{how}"] = {"n": c.n, "inside": c.inside, "share": round(c.share, 4) if c.n else None}
            if c.n:
                measured[f"bands/{kind}/{how}"] = {"coverage": c.share, "n": float(c.n)}
    fresh = None
    if not is_tripwire_profile(profile, thresholds):
        from sim.validate.fresh import FRESH_FILE_NAME, load_fresh

        fresh = load_fresh(thresholds_path.parent / FRESH_FILE_NAME)["limits"]
    report = check(measured, thresholds, str(thresholds_path), fresh)
    return Validation(hw, idle, rows, steps, hgains, summaries, measured, gain_stats, time_samples, gain_samples,
                      coverage, report, slowdowns, mgains, cgains, cranks, cexcluded)


def validation_document(v: Validation) -> dict[str, Any]:
    """The `kernelsim.validation/v2` JSON document (plain data)."""
    doc: dict[str, Any] = {"schema": "kernelsim.validation/v2", "profile": v.hw.name,
           "summaries": [s.__dict__ for s in v.summaries],
           "rows": [{**r.__dict__, "error": r.error} for r in v.rows],
           "gains": [{**g.__dict__, "error_pp": g.error_pp} for g in v.steps.gains],
           "ranking": [{"case": r.case, "bucket": r.bucket, "split": r.split, "measured": list(r.measured_order),
                        "predicted": list(r.predicted_order), "wrong_pairs": r.wrong_pairs()} for r in v.steps.ranks],
           "cases": [c.__dict__ for c in v.steps.cases],
           "fused_configs": {"gains": [{**g.__dict__, "error_pp": g.error_pp} for g in v.config_gains],
                             "ranking": [r.__dict__ for r in v.config_ranks],
                             "excluded": [{**e.__dict__, "reason": e.reason} for e in v.config_excluded]},
           "band_coverage": v.coverage,
           "gates": {"tripwires_exceeded": v.report.tripwires_exceeded, "goals_not_met": v.report.goals_not_met,
                     "goals_met": v.report.goals_met,
                     "ungated": [{"group": n, "reason": r} for n, r in v.report.ungated]},
           "violations": v.report.tripwires_exceeded + v.report.fresh_exceeded}
    if v.report.policy != "shipped":  # the shipped profile's document keeps its form
        doc["gates"].update({"policy": v.report.policy, "fresh_exceeded": v.report.fresh_exceeded,
                             "shipped_tripwires_exceeded": v.report.shipped_tripwires_exceeded})
    out: dict[str, Any] = json.loads(json.dumps(doc))
    return out
