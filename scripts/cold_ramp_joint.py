"""What pins gemm.cold_ramp_us: the ramp alone (the fit's method) against the ramp and the weight stream's rate
fitted jointly, on the clean cold GEMMs of each raw folder (issue 16, calib10).

    python scripts/cold_ramp_joint.py RAW_DIR[=PROFILE] [RAW_DIR[=PROFILE] ...]

For each raw folder: its calibration-split small-M GEMMs profiled after a read-only L2 flush (l2_cold.json, the
records sim.calibrate.fit fits gemm.cold_ramp_us on: clean state, set cal, not held out by record), priced with
PROFILE (default h200-measured; for a fresh folder pass the profile fitted from it, e.g. one that `python -m
sim.calibrate.repro ... --profiles-out DIR` kept, so that its kernel fixed cost, stream gap and GEMM correction
table are its own). Prints
1. the ramp alone, as the fit does it (the stream at memory.hbm_sustained_gbps, the copy-fitted rate), with its
   90 % bootstrap interval (sim.calibrate.fit._grid_fit: the same loss, resampling and seed);
2. the ramp and the stream rate fitted together (least squares in log time over the same records; grid: ramp
   0.1 us, rate 40 GB/s steps, the rate bounded by the datasheet peak memory.hbm_peak_gbps), with intervals;
3. a free line over the clean GEMMs of 60 MB and more: time = intercept + bytes / rate (no model), the
   intercept less the profiled fixed cost (kernel.fixed_us - kernel.launch_gap_us) being the ramp;
4. with --heldout, the held-out GEMM medians |error| of heldout_w4 (clean, fourth wave) and heldout_w3 (written
   flush, third wave) at the profile's own ramp, the ramp-alone fit and the joint fit (GEMM rows only: the joint
   rate is put in for GEMMs alone, copies and sums keep theirs).
CPU only; a few minutes per folder on a loaded 2-core VM.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sim.calibrate.cases import cases_from_raw  # noqa: E402
from sim.calibrate.fit import _grid_fit  # noqa: E402
from sim.calibrate.raw import held_out  # noqa: E402
from sim.hardware import Hardware, load_profile, resolve_profile  # noqa: E402

RAMPS = [round(0.05 * i, 2) for i in range(1, 101)]  # 0.05 .. 5 us
W3 = ROOT / "validation" / "h200" / "wave3" / "gpu" / "wave3_gpu.json"


def cold_gemm_cases(raw: Path) -> list[Any]:
    path = raw / "l2_cold.json"
    if not path.is_file():
        return []
    recs = json.loads(path.read_text())["records"]
    return [c for c in cases_from_raw({"l2_cold": recs}) if c.family == "gemm_cold" and not held_out(c.record)]


def free_line(raw: Path) -> tuple[float, float, int] | None:
    """(intercept us, rate GB/s, n) of time over bytes for the clean cal GEMMs of >= 60 MB (one or two kernels)."""
    path = raw / "l2_cold.json"
    if not path.is_file():
        return None
    pts = []
    for r in json.loads(path.read_text())["records"]:
        if r.get("bench") != "gemm" or r.get("l2_state") != "clean" or r.get("uneven_calls") or r.get("set") != "cal":
            continue
        m, n, k = int(r["m"]), int(r["n"]), int(r["k"])
        mb = (m * k + k * n + m * n) * 2 / 1e6
        if mb >= 60:
            pts.append((mb, sum(float(x["duration_us"]) for x in r["kernels"])))
    if len(pts) < 3:
        return None
    mx, my = statistics.fmean(p[0] for p in pts), statistics.fmean(p[1] for p in pts)
    slope = sum((x - mx) * (y - my) for x, y in pts) / sum((x - mx) ** 2 for x, _ in pts)
    return my - slope * mx, 1e3 / slope, len(pts)  # us per MB -> GB/s: 1e-6 s / 1e6 B


def heldout_gemm_medians(hw: Hardware) -> dict[str, float]:
    from sim.validate.wave2 import WAVE4_KERNELS, wave3_kernel_rows, wave4_kernel_rows

    out = {}
    for table, rows in (("w4", wave4_kernel_rows(hw, ROOT / WAVE4_KERNELS)), ("w3", wave3_kernel_rows(hw, W3))):
        errs = [abs(r.predicted_us / r.measured_us - 1) for r in rows if r.family == "gemm" and r.split == "unseen"]
        out[table] = statistics.median(errs) if errs else float("nan")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folders", nargs="+", metavar="RAW_DIR[=PROFILE]")
    ap.add_argument("--heldout", action="store_true", help="also the held-out GEMM medians (w4 clean, w3 flushed)")
    ns = ap.parse_args(argv)
    for spec in ns.folders:
        raw_s, _, prof = spec.partition("=")
        raw = Path(raw_s)
        hw = load_profile(resolve_profile(prof or "h200-measured", Path.cwd()))
        cases = cold_gemm_cases(raw)
        if not cases or hw.gemm_cold_ramp_s is None:
            print(f"{raw}: no clean cold GEMMs (or no gemm.cold_ramp_us in the profile)")
            continue
        peak = hw.hbm_peak_bps / 1e9
        alone = _grid_fit(cases, [{"v": v} for v in RAMPS],
                          lambda c, hw=hw: dataclasses.replace(hw, gemm_cold_ramp_s=c["v"] * 1e-6))
        rates = [round(hw.hbm_sustained_bps / 1e9 - 400 + 40 * j) for j in range(50)]
        rates = [r for r in rates if r <= peak]
        joint = _grid_fit(cases, [{"v": v, "bw": r} for v in RAMPS[1::2] for r in rates],
                          lambda c, hw=hw: dataclasses.replace(hw, gemm_cold_ramp_s=c["v"] * 1e-6,
                                                          hbm_sustained_bps=c["bw"] * 1e9))
        line = free_line(raw)
        profiled_fixed = (hw.kernel_fixed_s - hw.launch_gap_s) * 1e6
        print(f"{raw} ({prof or 'h200-measured'}): {len(cases)} clean cold GEMMs; profile ramp "
              f"{hw.gemm_cold_ramp_s * 1e6:.2f} us, copy rate {hw.hbm_sustained_bps / 1e9:.0f} GB/s, peak {peak:.0f}, "
              f"profiled fixed {profiled_fixed:.2f} us")
        print(f"  ramp alone (stream at the copy rate): {alone.best['v']:.2f} us {alone.spread['v']}")
        print(f"  joint: ramp {joint.best['v']:.2f} us {joint.spread['v']}, stream {joint.best['bw']:.0f} GB/s "
              f"{joint.spread['bw']}")
        if line:
            print(f"  free line over {line[2]} GEMMs >= 60 MB: intercept {line[0]:.2f} us (ramp {line[0] - profiled_fixed:.2f}),"
                  f" rate {line[1]:.0f} GB/s")
        if ns.heldout:
            own = heldout_gemm_medians(hw)
            a = heldout_gemm_medians(dataclasses.replace(hw, gemm_cold_ramp_s=alone.best["v"] * 1e-6))
            j = heldout_gemm_medians(dataclasses.replace(hw, gemm_cold_ramp_s=joint.best["v"] * 1e-6,
                                                         hbm_sustained_bps=joint.best["bw"] * 1e9))
            print("  held-out GEMM medians |error| (w4 clean / w3 flushed): "
                  f"profile {own['w4']:.3f} / {own['w3']:.3f}; ramp alone {a['w4']:.3f} / {a['w3']:.3f}; "
                  f"joint {j['w4']:.3f} / {j['w3']:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
