"""The `calibrate` and `validate` commands' work (the CLI parses; this module runs and renders).

calibrate: measure on a CUDA GPU (sim.calibrate.gpu, torch/triton) into a raw folder, then fit;
or fit from an existing raw folder on any machine (--from-raw).
validate: offline, compare committed measurements with kernelsim's predictions (kernel and
step level, calibrated and unseen shapes) and check them against the versioned gates (goals are
reported, tripwires fail); --write-bands turns the step errors into the band table that run,
sweep, advise and serve read; --measure re-measures the validation workloads on a GPU first.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.markup import escape

from sim.errors import InputError
from sim.outputs import dumps, write_text_atomic
from sim.report.progress import busy
from sim.report.tables import Col, print_table

VALIDATION_EXIT = 3  # a tripwire exceeded


CALIBRATE_WITHOUT_GPU = "to fit committed raw data on this machine use kernelsim calibrate --from-raw DIR --out FILE"
VALIDATE_WITHOUT_GPU = "to compare the committed measurements on this machine run kernelsim validate without --measure"


def _require_gpu(without_gpu: str) -> None:
    """Raise an InputError saying what is missing and what works without a GPU (`without_gpu`)."""
    if importlib.util.find_spec("torch") is None or importlib.util.find_spec("triton") is None:
        raise InputError("measuring needs a CUDA GPU with torch and triton (pip install 'kernelsim[gpu]'); "
                         + without_gpu)
    probe = subprocess.run([sys.executable, "-c", "import torch,sys; sys.exit(0 if torch.cuda.is_available() else 1)"],
                           capture_output=True)
    if probe.returncode != 0:
        raise InputError("no CUDA GPU is visible to torch; " + without_gpu)


def measure_raw(raw_dir: Path, quick: bool, console: Console) -> None:
    """Run the microbenchmarks (a subprocess, so torch never loads into kernelsim itself)."""
    _require_gpu(CALIBRATE_WITHOUT_GPU)
    raw_dir.mkdir(parents=True, exist_ok=True)
    from sim.calibrate.gpu.calibrate_all import steps as measurement_steps

    steps = measurement_steps(str(raw_dir), quick)
    for cmd in steps:
        console.print(f"[bold]measuring:[/bold] {escape(' '.join(cmd))}")
        done = subprocess.run(cmd)
        if done.returncode != 0:
            raise RuntimeError(f"measurement failed ({done.returncode}): {' '.join(cmd)}")


def _fitted_value(value: Any) -> str:
    return str(value if not isinstance(value, dict) else ("table" if "points" in value else value))


def cmd_calibrate(args: Any, console: Console) -> int:
    from sim.calibrate.fit import calibrate_from_raw
    from sim.hardware import resolve_profile

    out = Path(args.out)
    if out.is_dir():
        raise InputError("--out names a folder, expected the profile file to write", value=args.out)
    base = resolve_profile(args.base, Path.cwd(), path="--base")
    if args.from_raw:
        raw_dir = Path(args.from_raw)
    else:
        raw_dir = Path(args.raw) if args.raw else Path(tempfile.mkdtemp(prefix="kernelsim-raw-"))
        measure_raw(raw_dir, args.quick, console)
    name = args.name or out.stem
    with busy(f"fitting a profile from {raw_dir}"):
        text, result = calibrate_from_raw(raw_dir, base, out, name)
    write_text_atomic(out, text)
    rows = [(f.section, f.key, _fitted_value(f.value), f"{f.spread[0]:g}–{f.spread[1]:g}" if f.spread else "",
             str(f.n or ""), f.fit) for f in result.values]
    rows.append(("gemm", "correction", f"{len(result.gemm_correction)} points", "", "", "measured / model, training split"))
    print_table(console, f"fitted numbers → {out}", [
        Col("section", lambda r: r[0], numeric=False), Col("key", lambda r: r[1], numeric=False),
        Col("value", lambda r: r[2]), Col("90 % interval", lambda r: r[3]), Col("n", lambda r: r[4]),
        Col("fit", lambda r: r[5], numeric=False)], rows)
    for note in result.notes:
        console.print(f"note: {note}", markup=False)
    console.print(f"wrote {out} (raw data: {raw_dir})", markup=False)
    return 0


def cmd_validate(args: Any, console: Console) -> int:
    from sim.hardware import load_profile, resolve_profile
    from sim.validate.bands import (
        BAND_FILE_HEADER,
        DEFAULT_BANDS_FILE,
        HOST_BOUND_GPU_IDLE_SHARE,
        Sample,
        band_document,
        load_bands,
        loo_coverage,
    )
    from sim.validate.core import (
        check,
        kernel_rows,
        load_thresholds,
        markdown,
        measured_quantities,
        summarize,
    )
    from sim.validate.host import gain_groups, host_gain_lines, host_rows
    from sim.validate.steps import gains_markdown, step_rows

    cases = Path(args.cases)
    if args.measure:
        _require_gpu(VALIDATE_WITHOUT_GPU)
        target = cases.parent
        cmd = [sys.executable, "-m", "sim.calibrate.gpu.validate", "--mode", "full", "--out", str(target),
               "--traces-out", str(Path(args.traces_out))]
        console.print(f"[bold]measuring:[/bold] {escape(' '.join(cmd))}")
        if subprocess.run(cmd).returncode != 0:
            raise RuntimeError("validation measurement failed")
    thresholds_path = Path(args.thresholds)
    thresholds = load_thresholds(thresholds_path)
    current = load_bands()
    idle = current.idle_threshold if current else HOST_BOUND_GPU_IDLE_SHARE
    hw = load_profile(args.profile, Path.cwd(), path="--profile")
    base = resolve_profile(args.base, Path.cwd(), path="--base")
    with busy("validating: predicting every measured kernel, step and collective"):
        rows = kernel_rows(Path(args.raw), hw, base)
        steps = step_rows(cases, args.profile, idle)
        rows += steps.rows
        # issue 15: host time in real models; the configs the host fit may use are "calibrated"
        hrows, hgains = host_rows(Path(args.raw).parent / "host_context", hw)
        rows += [dataclasses.replace(r, split="calibrated" if r.split == "fit" else "unseen") for r in hrows]
        # second measurement wave: held-out kernels (issue 18) and collectives on two GPUs (issue 20)
        from sim.validate.wave2 import wave2_rows

        rows += wave2_rows(hw, Path(args.raw).parent.parent.parent)
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
    # issue 20: slowdowns of a load and all-reduces on two streams of two GPUs, in percentage points
    from sim.validate.comm import contention_lines, contention_quantities
    from sim.validate.wave2 import contention_validation

    slowdowns = contention_validation(Path(args.raw).parent.parent.parent)
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
    report = check(measured, thresholds, str(thresholds_path))

    print_table(console, f"validation against measurements ({hw.name}) — headline: the unseen split", [
        Col("level", lambda s: s.table, numeric=False), Col("family", lambda s: s.family, numeric=False),
        Col("shapes", lambda s: s.split, numeric=False), Col("n", lambda s: str(s.n)),
        Col("median |err|", lambda s: f"{s.median_abs:.1%}"), Col("p90 |err|", lambda s: f"{s.p90_abs:.1%}"),
        Col("max |err|", lambda s: f"{s.max_abs:.1%}"), Col("median err", lambda s: f"{s.median_signed:+.1%}")],
        summaries, keys=3)
    gain_lines = []
    for split, (n, med, wrong) in gain_stats.items():
        rank = measured.get(f"ranking/{split}", {})
        gain_lines.append(f"gains ({split} shapes): {n} variant×bucket pairs, median |error| {med:.1f} pp; sign wrong "
                          f"where |measured gain| > 3%: {wrong}; ranking wrong in {int(rank.get('wrong_buckets', 0))} of "
                          f"{int(rank.get('n', 0))} buckets")
    gain_lines += host_gain_lines(hgains)
    gain_lines += contention_lines(slowdowns)
    for line in gain_lines:
        console.print(escape(line))
    for key, c in coverage.items():
        if c["n"]:
            console.print(f"90% band coverage, unseen shapes, {key.replace('/', ' ').replace('_', ' ')}: "
                          f"{c['inside']} of {c['n']} ({c['share']:.0%})")
    for ci in steps.cases:
        console.print(f"case {ci.case}: {ci.calibrated_kernel_share:.0%} of kernel time at calibrated points"
                      + (" (unseen model)" if ci.unseen_model else ""))
    for name, reason in report.ungated:
        console.print(f"ungated: {escape(name)}: {escape(reason)}", highlight=False)
    for line in report.goals_not_met:
        console.print(f"[yellow]goal not met:[/yellow] {escape(line)}", highlight=False)
    for name in report.stale:
        console.print(f"note: gate {name} matches no validated group", highlight=False)
    if getattr(args, "write_bands", None):  # sim.calibrate.repro calls this without it
        doc = band_document(time_samples, gain_samples, hw.name, idle, coverage)
        out = Path(args.write_bands)
        write_text_atomic(out, BAND_FILE_HEADER + yaml.safe_dump(doc, sort_keys=False, width=120))
        console.print(f"wrote {out}" + ("" if out.resolve() == DEFAULT_BANDS_FILE else
                                        f" (run, advise, sweep and serve read {DEFAULT_BANDS_FILE})"))
    if args.markdown:
        text = (markdown(rows, summaries, "kernelsim validation on an NVIDIA H200", report, coverage, steps.cases)
                + "\n" + "".join(f"- {line}\n" for line in gain_lines) + "\n" + gains_markdown(gains, ranks))
        from sim.calibrate.repro import keep_generated_section

        write_text_atomic(Path(args.markdown), keep_generated_section(Path(args.markdown), text))
        console.print(f"wrote {args.markdown}", markup=False)
    if args.json:
        doc = {"schema": "kernelsim.validation/v2", "profile": hw.name,
               "summaries": [s.__dict__ for s in summaries],
               "rows": [{**r.__dict__, "error": r.error} for r in rows],
               "gains": [{**g.__dict__, "error_pp": g.error_pp} for g in gains],
               "ranking": [{"case": r.case, "bucket": r.bucket, "split": r.split, "measured": list(r.measured_order),
                            "predicted": list(r.predicted_order), "wrong_pairs": r.wrong_pairs()} for r in ranks],
               "cases": [c.__dict__ for c in steps.cases],
               "band_coverage": coverage,
               "gates": {"tripwires_exceeded": report.tripwires_exceeded, "goals_not_met": report.goals_not_met,
                         "goals_met": report.goals_met,
                         "ungated": [{"group": n, "reason": r} for n, r in report.ungated]},
               "violations": report.tripwires_exceeded}
        write_text_atomic(Path(args.json), dumps(json.loads(json.dumps(doc))))
    if report.failed:
        for p in report.tripwires_exceeded:
            console.print(f"[red]tripwire exceeded:[/red] {escape(p)}", highlight=False)
        return VALIDATION_EXIT
    console.print(f"all tripwires hold; {len(report.goals_met)} goal(s) met, {len(report.goals_not_met)} not met, "
                  f"{len(report.ungated)} group(s) ungated")
    return 0
