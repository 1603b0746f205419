"""The `calibrate` and `validate` commands' work (the CLI parses; this module runs and renders).

calibrate: measure on a CUDA GPU (sim.calibrate.gpu, torch/triton) into a raw folder, then fit;
or fit from an existing raw folder on any machine (--from-raw).
validate: offline, compare committed measurements with kernelsim's predictions (kernel and
step level, calibrated and unseen shapes) and check them against the versioned gates (goals are
reported, tripwires fail); --write-bands turns the step errors into the band table that run,
sweep, advise and serve read; --measure re-measures the validation workloads on a GPU first.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.markup import escape

from sim.errors import InputError
from sim.outputs import OutputError, check_output_path, dumps, write_files_atomic, write_text_atomic
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


def _input_files(*paths: str | Path | None) -> list[Path]:
    """The files a command reads, for the output checks: each path given, and a folder's files."""
    out: list[Path] = []
    for value in paths:
        if not value:
            continue
        p = Path(value)
        out += sorted(p.iterdir()) if p.is_dir() else [p]
    return out


DEFAULT_BASE = "h200-sxm"  # the datasheet profile a full calibration fits over
QUICK_BASE = "h200-measured"  # a quick calibration: the groups it skips keep these measured numbers


def default_base(raw_dir: Path, quick: bool) -> str:
    """The base profile when --base is not given: a quick calibration (the flag, or a raw folder whose
    calibrate_all.json says so) keeps the shipped measured profile's numbers for the groups it skips."""
    import json

    log = raw_dir / "calibrate_all.json"
    try:
        quick = quick or bool(json.loads(log.read_text()).get("quick")) if log.is_file() else quick
    except (OSError, ValueError):
        pass
    return QUICK_BASE if quick else DEFAULT_BASE


def _fitted_value(value: Any) -> str:
    return str(value if not isinstance(value, dict) else ("table" if "points" in value else value))


def cmd_calibrate(args: Any, console: Console) -> int:
    from sim.calibrate import fit
    from sim.hardware import resolve_profile

    raw_inputs = [args.from_raw] if args.from_raw else []
    out = check_output_path(args.out, "--out", inputs=_input_files(*raw_inputs, args.base))
    host = getattr(args, "host", "fitted")
    host_ref = (resolve_profile(args.host_reference, Path.cwd(), path="--host-reference") if host == "reference"
                else None)  # bad input before measuring
    if args.from_raw:
        raw_dir = Path(args.from_raw)
    else:
        raw_dir = Path(args.raw) if args.raw else Path(tempfile.mkdtemp(prefix="kernelsim-raw-"))
        resolve_profile(args.base or DEFAULT_BASE, Path.cwd(), path="--base")  # bad input before measuring
        measure_raw(raw_dir, args.quick, console)
    base = resolve_profile(args.base or default_base(raw_dir, args.quick), Path.cwd(), path="--base")
    name = args.name or out.stem
    fit.check_profile_name(name)  # where calibrate_from_raw checks it: before fitting
    with busy(f"fitting a profile from {raw_dir}"):
        fitted = fit.fit_from_raw(raw_dir, base, host=host, host_reference=host_ref)
        text = fit.render_fit(fitted, out, name)
    result = fitted.result
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
    from sim.validate.bands import BAND_FILE_HEADER, DEFAULT_BANDS_FILE, band_document
    from sim.validate.comm import contention_lines
    from sim.validate.core import markdown
    from sim.validate.fused_configs import config_lines, config_markdown
    from sim.validate.host import host_gain_lines
    from sim.validate.steps import gains_markdown
    from sim.validate.suite import run_validation, validation_document

    cases = Path(args.cases)
    inputs = _input_files(args.cases, args.thresholds, args.raw, args.profile, args.base)
    outputs = {flag: check_output_path(value, flag, inputs=inputs)
               for flag, value in (("--write-bands", getattr(args, "write_bands", None)),
                                   ("--markdown", getattr(args, "markdown", None)), ("--json", getattr(args, "json", None)))
               if value is not None}  # checked before any work; written together at the end
    resolved = [p.resolve() for p in outputs.values()]
    for path, r in zip(outputs.values(), resolved, strict=True):
        if resolved.count(r) > 1:
            raise OutputError(str(path), "named twice as an output of this command")
    files: list[tuple[Path, bytes]] = []
    if args.measure:
        _require_gpu(VALIDATE_WITHOUT_GPU)
        target = cases.parent
        cmd = [sys.executable, "-m", "sim.calibrate.gpu.validate", "--mode", "full", "--out", str(target),
               "--traces-out", str(Path(args.traces_out))]
        console.print(f"[bold]measuring:[/bold] {escape(' '.join(cmd))}")
        if subprocess.run(cmd).returncode != 0:
            raise RuntimeError("validation measurement failed")
    v = run_validation(args.profile, args.base, Path(args.raw), cases, Path(args.thresholds), busy=busy)
    hw, rows, steps, summaries, measured, report = v.hw, v.rows, v.steps, v.summaries, v.measured, v.report
    gains, ranks, coverage = steps.gains, steps.ranks, v.coverage

    print_table(console, f"validation against measurements ({hw.name}) — headline: the unseen split", [
        Col("level", lambda s: s.table, numeric=False), Col("family", lambda s: s.family, numeric=False),
        Col("shapes", lambda s: s.split, numeric=False), Col("n", lambda s: str(s.n)),
        Col("median |err|", lambda s: f"{s.median_abs:.1%}"), Col("p90 |err|", lambda s: f"{s.p90_abs:.1%}"),
        Col("max |err|", lambda s: f"{s.max_abs:.1%}"), Col("median err", lambda s: f"{s.median_signed:+.1%}")],
        summaries, keys=3)
    gain_lines = []
    for split, (n, med, wrong) in v.gain_stats.items():
        rank = measured.get(f"ranking/{split}", {})
        gain_lines.append(f"gains ({split} shapes): {n} variant×bucket pairs, median |error| {med:.1f} pp; sign wrong "
                          f"where |measured gain| > 3%: {wrong}; ranking wrong in {int(rank.get('wrong_buckets', 0))} of "
                          f"{int(rank.get('n', 0))} buckets")
    gain_lines += host_gain_lines(v.host_gains)
    gain_lines += [line.replace('host gains ', 'host gains (held-out machine) ', 1) for line in host_gain_lines(v.machine_gains)]
    gain_lines += contention_lines(v.slowdowns)
    gain_lines += config_lines(v.config_gains, v.config_ranks, v.config_excluded)
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
        doc = band_document(v.time_samples, v.gain_samples, hw.name, v.idle, coverage)
        out = outputs["--write-bands"]
        files.append((out, (BAND_FILE_HEADER + yaml.safe_dump(doc, sort_keys=False, width=120)).encode()))
    if "--markdown" in outputs:
        text = (markdown(rows, summaries, "kernelsim validation on an NVIDIA H200", report, coverage, steps.cases)
                + "\n" + "".join(f"- {line}\n" for line in gain_lines) + "\n" + gains_markdown(gains, ranks)
                + "\n" + config_markdown(v.config_gains, v.config_ranks))
        from sim.calibrate.repro import keep_generated_section

        files.append((outputs["--markdown"], keep_generated_section(outputs["--markdown"], text).encode()))
    if "--json" in outputs:
        files.append((outputs["--json"], dumps(validation_document(v)).encode()))
    write_files_atomic(files)  # every output or none
    for out, _ in files:
        console.print(f"wrote {out}" + ("" if out != outputs.get("--write-bands") or out.resolve() == DEFAULT_BANDS_FILE
                                        else f" (run, advise, sweep and serve read {DEFAULT_BANDS_FILE})"), markup=False)
    if report.policy == "fresh":
        console.print(f"{hw.name} is not the shipped profile the tripwires guard: gated by the fresh-calibration "
                      f"limits (validation/fresh_limits.yaml, {report.fresh_checked} limits); "
                      f"{len(report.shipped_tripwires_exceeded)} of the shipped profile's tripwires would be exceeded "
                      "(listed with --json, not applied)", markup=False)
    if report.failed:
        for p in report.tripwires_exceeded:
            console.print(f"[red]tripwire exceeded:[/red] {escape(p)}", highlight=False)
        for p in report.fresh_exceeded:
            console.print(f"[red]fresh limit exceeded:[/red] {escape(p)}", highlight=False)
        return VALIDATION_EXIT
    held = "all fresh-calibration limits hold" if report.policy == "fresh" else "all tripwires hold"
    console.print(f"{held}; {len(report.goals_met)} goal(s) met, {len(report.goals_not_met)} not met, "
                  f"{len(report.ungated)} group(s) ungated")
    return 0
