"""The `calibrate` and `validate` commands' work (the CLI parses; this module runs and renders).

calibrate: measure on a CUDA GPU (sim.calibrate.gpu, torch/triton) into a raw folder, then fit;
or fit from an existing raw folder on any machine (--from-raw).
validate: offline, compare committed measurements with kernelsim's predictions (kernel and
step level) and check them against the versioned thresholds; --measure re-measures the
validation workloads on a GPU first.
"""

from __future__ import annotations

import importlib.util
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from sim.errors import InputError
from sim.outputs import dumps, write_text_atomic

VALIDATION_EXIT = 3  # thresholds exceeded


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
    text, result = calibrate_from_raw(raw_dir, base, out, name)
    write_text_atomic(out, text)
    t = Table(title=f"fitted numbers → {out}", title_justify="left")
    for col in ("section", "key", "value", "90 % interval", "n", "fit"):
        t.add_column(col)
    for f in result.values:
        value = f.value if not isinstance(f.value, dict) else ("table" if "points" in f.value else f.value)
        spread = f"{f.spread[0]:g}–{f.spread[1]:g}" if f.spread else ""
        t.add_row(f.section, f.key, str(value), spread, str(f.n or ""), f.fit)
    t.add_row("gemm", "correction", f"{len(result.gemm_correction)} points", "measured / model, training split")
    console.print(t)
    for note in result.notes:
        console.print(f"note: {note}", markup=False)
    console.print(f"wrote {out} (raw data: {raw_dir})", markup=False)
    return 0


def cmd_validate(args: Any, console: Console) -> int:
    from sim.hardware import load_profile, resolve_profile
    from sim.validate import check, kernel_rows, load_thresholds, markdown, summarize
    from sim.validate_host import check_host_gains, host_gain_lines, host_rows
    from sim.validate_steps import gains_markdown, step_rows

    cases = Path(args.cases)
    if args.measure:
        _require_gpu(VALIDATE_WITHOUT_GPU)
        target = cases.parent
        cmd = [sys.executable, "-m", "sim.calibrate.gpu.validate", "--mode", "full", "--out", str(target),
               "--traces-out", str(Path(args.traces_out))]
        console.print(f"[bold]measuring:[/bold] {escape(' '.join(cmd))}")
        if subprocess.run(cmd).returncode != 0:
            raise RuntimeError("validation measurement failed")
    hw = load_profile(args.profile, Path.cwd(), path="--profile")
    base = resolve_profile(args.base, Path.cwd(), path="--base")
    rows = kernel_rows(Path(args.raw), hw, base)
    srows, gains, ranks = step_rows(cases, args.profile)
    rows += srows
    hrows, hgains = host_rows(Path(args.raw).parent / "host_context", hw)  # issue 15: host time in real models
    rows += hrows
    summaries = summarize(rows)
    thresholds = load_thresholds(Path(args.thresholds))
    problems = check(summaries, thresholds)
    gain_limit = (thresholds.get("gains") or {}).get("median_abs_pp")
    median_pp = statistics.median(abs(g.error_pp) for g in gains) if gains else 0.0
    if gain_limit is not None and median_pp > float(gain_limit):
        problems.append(f"gains: median |error| {median_pp:.1f} pp > {float(gain_limit):.1f} pp")
    problems += check_host_gains(hgains, thresholds)
    rank_limit = (thresholds.get("ranking") or {}).get("max_wrong_buckets")
    wrong_buckets = sum(1 for r in ranks if not r.ok)
    if rank_limit is not None and wrong_buckets > int(rank_limit):
        problems.append(f"ranking: {wrong_buckets} buckets with a wrong pair > {int(rank_limit)}")
    table = Table(title=f"validation against measurements ({hw.name})", title_justify="left")
    for col in ("level", "family", "split", "n", "median |err|", "p90 |err|", "max |err|", "median err"):
        table.add_column(col, justify="left" if col in ("level", "family", "split") else "right")
    for s in summaries:
        table.add_row(s.table, s.family, s.split, str(s.n), f"{s.median_abs:.1%}", f"{s.p90_abs:.1%}",
                      f"{s.max_abs:.1%}", f"{s.median_signed:+.1%}")
    console.print(table)
    console.print(f"gains: {len(gains)} variant×bucket pairs, median |error| {median_pp:.1f} pp; "
                  f"sign wrong where |measured gain| > 3%: "
                  f"{sum(1 for g in gains if not g.sign_ok and abs(g.measured_gain) > 0.03)}; "
                  f"ranking wrong in {wrong_buckets} of {len(ranks)} buckets")
    for line in host_gain_lines(hgains):
        console.print(line)
    if args.markdown:
        text = markdown(rows, summaries, "kernelsim validation on an NVIDIA H200") + "\n" + gains_markdown(gains, ranks)
        if hgains:
            text += "\n" + "\n".join(["## Host-bound gains (measured vs predicted)", ""] + host_gain_lines(hgains)) + "\n"
        from sim.calibrate.repro import keep_generated_section

        write_text_atomic(Path(args.markdown), keep_generated_section(Path(args.markdown), text))
        console.print(f"wrote {args.markdown}", markup=False)
    if args.json:
        doc = {"schema": "kernelsim.validation/v1", "profile": hw.name,
               "summaries": [s.__dict__ for s in summaries],
               "rows": [{**r.__dict__, "error": r.error} for r in rows],
               "gains": [{**g.__dict__, "error_pp": g.error_pp} for g in gains],
               "host_gains": [{**g.__dict__, "error_pp": g.error_pp} for g in hgains],
               "ranking": [{"case": r.case, "bucket": r.bucket, "measured": list(r.measured_order),
                            "predicted": list(r.predicted_order), "wrong_pairs": r.wrong_pairs()} for r in ranks],
               "violations": problems}
        write_text_atomic(Path(args.json), dumps(json.loads(json.dumps(doc))))
    if problems:
        for p in problems:
            console.print(f"[red]threshold exceeded:[/red] {escape(p)}")
        return VALIDATION_EXIT
    console.print("all thresholds met")
    return 0
