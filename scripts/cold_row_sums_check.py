"""Whether l2_cold's few-block row sums (part row_sum_cal, issue 16, calib13) separate the cold loop's iteration from
its entry: the cold reduce-kernel fit with and without them, and what each prices on held-out sums.

    python scripts/cold_row_sums_check.py DIR [--profile h200-measured] [--heldout FILE]

DIR holds an l2_cold.json (sim.calibrate.gpu.l2_cold) with the row_sum_cal records (28x2560, 56x4608, 44x5632,
x.sum(1) only). FILE (default DIR/heldout_l2.json, where present): sim.calibrate.gpu.heldout_l2 records measured on
the same machine (e.g. part sum_w3: heldout_w3's shapes in three L2 states).

1. sim.calibrate.fit.fit_reduce_kernel at state cold over DIR's clean training-split sums (as `kernelsim calibrate`
   reads them: cases_from_raw, held_out), on PROFILE's other numbers: once without the row_sum_cal records, once with;
2. the few-block clean row sums (vec path, <= 48 blocks) of DIR and FILE: median measured time per loop-iteration
   count and a line through them (the per-iteration time a chain pays);
3. median |predicted / measured - 1| (signed median) of PyTorch's sums, all and vec path (row sums), in: DIR's
   held-out split (clean), FILE's clean and dirty sums, heldout_w3 (validation/h200/wave3/gpu, machine D, after a
   written flush) and heldout_w4 (validation/h200/wave4/heldout_l2, clean and dirty), for PROFILE as it is and with
   each fit's cold numbers.
CPU only; about a minute.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sim.calibrate.cases import cases_from_raw  # noqa: E402
from sim.calibrate.fit import fit_reduce_kernel  # noqa: E402
from sim.calibrate.gpu.heldout_l2 import CAL_ROW_SUM  # noqa: E402
from sim.calibrate.heldout_cases import heldout_cases  # noqa: E402
from sim.calibrate.raw import held_out, load_raw  # noqa: E402
from sim.hardware import Hardware, load_profile  # noqa: E402

W3 = ROOT / "validation" / "h200" / "wave3" / "gpu" / "wave3_gpu.json"
W4 = ROOT / "validation" / "h200" / "wave4" / "heldout_l2" / "heldout_l2.json"


def _is_row_sum_cal(c: Any) -> bool:
    return (int(c.record["rows"]), int(c.record["cols"])) in CAL_ROW_SUM


def cold_sums(folder: Path) -> list[Any]:
    raw = load_raw(folder)
    return [c for c in cases_from_raw({"l2_cold": list(raw.records("l2_cold"))}) if c.family == "reduction_cold"]


def fitted(cases: list[Any], hw: Hardware) -> tuple[Hardware, dict[str, tuple[float, Any, Any]]]:
    fits = fit_reduce_kernel(cases, hw, "cold", "l2_cold.json")
    vals = {f.key: (float(f.value), f.spread, f.n) for f in fits}  # type: ignore[arg-type]
    return dataclasses.replace(hw, reduce_kernel={**hw.reduce_kernel, **{k: v[0] for k, v in vals.items()}}), vals


def _stats(errs: list[float]) -> str:
    if not errs:
        return "—"
    return f"{statistics.median(abs(e) for e in errs):.3f} ({statistics.median(errs):+.3f}) n {len(errs)}"


def priced(hw: Hardware, cases: list[Any]) -> tuple[str, str]:
    errs, vec = [], []
    for c in cases:
        e = c.predicted_us(hw) / c.measured_us - 1
        errs.append(e)
        if c.predict(hw)[0].detail.get("path") == "vec":
            vec.append(e)
    return _stats(errs), _stats(vec)


def chains(hw: Hardware, cases: list[Any]) -> str:
    pts: dict[int, list[float]] = {}
    for c in cases:
        d = c.predict(hw)[0].detail
        if d.get("path") == "vec" and int(d["grid"]) <= 48 and d.get("l2") == "cold" and not c.graph.ops[0].attrs.get("l2_dirty"):
            pts.setdefault(int(d["iterations"]), []).append(c.measured_us)
    xs = sorted(pts)
    if len(xs) < 2:
        return "fewer than two iteration counts"
    med = [statistics.median(pts[x]) for x in xs]
    mx, my = statistics.fmean(xs), statistics.fmean(med)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, med, strict=True)) / sum((x - mx) ** 2 for x in xs)
    return (", ".join(f"{x}: {y:.2f} us (n {len(pts[x])})" for x, y in zip(xs, med, strict=True))
            + f"; line: {slope * 1e3:.0f} ns per iteration, intercept {my - slope * mx:.2f} us")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", type=Path)
    ap.add_argument("--profile", default="h200-measured")
    ap.add_argument("--heldout", type=Path)
    ns = ap.parse_args(argv)
    hw = load_profile(ns.profile)
    sums = cold_sums(ns.dir)
    train = [c for c in sums if not held_out(c.record)]
    rows = [c for c in train if _is_row_sum_cal(c)]
    print(f"{ns.dir}: {len(sums)} clean cold sums, {len(train)} training split, of them {len(rows)} row_sum_cal")
    hw_without, v_without = fitted([c for c in train if not _is_row_sum_cal(c)], hw)
    hw_with, v_with = fitted(train, hw)
    print("\n| reduce_kernel (cold) | " + ns.profile + " | fit without row_sum_cal [90 %] n | with [90 %] n |\n|---|---|---|---|")
    for k in sorted(set(v_without) | set(v_with)):
        def fmt(v: tuple[float, Any, Any] | None) -> str:
            return "—" if v is None else f"{v[0]:g} {list(v[1]) if v[1] else ''} {v[2]}"
        print(f"| {k} | {hw.reduce_kernel.get(k)} | {fmt(v_without.get(k))} | {fmt(v_with.get(k))} |")
    heldout_file = ns.heldout or (ns.dir / "heldout_l2.json")
    own_held = [c for c in heldout_cases(heldout_file) if c.family == "reduction_heldout" and c.measured_us > 0] \
        if heldout_file.is_file() else []
    print("\nfew-block clean row sums, this machine:", chains(hw, sums + own_held))
    w4 = [c for c in heldout_cases(W4) if c.family == "reduction_heldout" and c.measured_us > 0]
    tables = {"this machine's l2_cold, held-out split (clean)": [c for c in sums if held_out(c.record)],
              "this machine's heldout_l2 clean": [c for c in own_held if c.record.get("l2_state") == "clean"],
              "this machine's heldout_l2 dirty": [c for c in own_held if c.record.get("l2_state") == "dirty"],
              "heldout_w3 (machine D, dirty)": [c for c in heldout_cases(W3) if c.family == "reduction_heldout"
                                                and c.measured_us > 0],
              "heldout_w4 clean": [c for c in w4 if c.record.get("l2_state") == "clean"],
              "heldout_w4 dirty": [c for c in w4 if c.record.get("l2_state") == "dirty"]}
    print(f"\n| table | {ns.profile}: all / row sums | fit without rows: all / row sums | fit with rows: all / row sums |"
          "\n|---|---|---|---|")
    for name, cases in tables.items():
        if not cases:
            continue
        cells = [" / ".join(priced(h, cases)) for h in (hw, hw_without, hw_with)]
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
