"""What the reduction model gets wrong on heldout_w3's sums (issue 16, calib12).

    python scripts/reduction_w3_check.py [PROFILE ...] [--writeback-gbps R]

For each profile (default h200-measured), PyTorch's sums (x.sum(dim), reduce_kernel) of four tables:
- `l2_cold` of calibration/h200/raw, set cal, after a read-only flush: the record split the cold
  reduce_kernel numbers are fitted on ("fit") and its held-out shapes ("held");
- `l2_cold`'s same shapes after a flush that wrote 256 MB (an L2 full of dirty lines; read by no fit and no gate);
- heldout_w4 (validation/h200/wave4/heldout_l2, another machine and wave): the same kinds of shapes after a
  read-only flush ("clean", gated) and after a flush that wrote 256 MB ("dirty", not gated);
- heldout_w3 (validation/h200/wave3/gpu, machine D): after a written flush (gated, the fresh limit every
  fresh profile exceeds);
and for each: n, median |predicted / measured - 1|, median signed error, split by ATen's two loop paths
(`vec`: a row sum, one vector load per iteration; `ilp`: a column sum, four loads per iteration).
Then whether the model's launch (grid, block) is the one the profiler recorded, and what the few-block row
sums (chains of dependent HBM round trips, <= 48 blocks) measure per loop iteration against the profile's
reduce_kernel.iter_ns_vec_cold.

With --writeback-gbps R the profile gets memory.l2_dirty_writeback_gbps = R (the GEMM-fitted rate of an L2 full
of dirty lines, gpu10; absent in every shipped profile): dirty-flush sums then pay min(bytes read, L2) / R.
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

from sim.calibrate.cases import _profiled_reduction, cases_from_raw  # noqa: E402
from sim.calibrate.heldout_cases import heldout_cases  # noqa: E402
from sim.calibrate.raw import held_out, load_raw  # noqa: E402
from sim.hardware import Hardware, load_profile  # noqa: E402

W3 = ROOT / "validation" / "h200" / "wave3" / "gpu" / "wave3_gpu.json"
W4 = ROOT / "validation" / "h200" / "wave4" / "heldout_l2" / "heldout_l2.json"


def tables() -> dict[str, list[Any]]:
    raw = load_raw(ROOT / "calibration" / "h200" / "raw")
    cold = [c for c in cases_from_raw({"l2_cold": list(raw.records("l2_cold"))})
            if c.graph.ops[0].attrs.get("impl") == "torch_reduce"]
    w4 = [c for c in heldout_cases(W4) if c.family == "reduction_heldout" and c.measured_us > 0]
    dirty = [_profiled_reduction({**r, "bench": f"sum_dim{r['dim']}"}) for r in raw.records("l2_cold", "sum")
             if r.get("l2_state") == "dirty" and r.get("set") == "cal" and not r.get("uneven_calls")]
    return {
        "l2_cold fit": [c for c in cold if not held_out(c.record)],
        "l2_cold held": [c for c in cold if held_out(c.record)],
        "l2_cold dirty (all shapes)": [c for c in dirty if c is not None and c.measured_us > 0],
        "heldout_w4 clean": [c for c in w4 if c.record.get("l2_state") == "clean"],
        "heldout_w4 dirty": [c for c in w4 if c.record.get("l2_state") == "dirty"],
        "heldout_w3 (dirty)": [c for c in heldout_cases(W3) if c.family == "reduction_heldout" and c.measured_us > 0],
    }


def _stats(errs: list[float]) -> str:
    if not errs:
        return "—"
    return f"{statistics.median(abs(e) for e in errs):.3f} ({statistics.median(errs):+.3f})"


def report(hw: Hardware, sets: dict[str, list[Any]]) -> None:
    print("| table | n | all: median abs (signed) | vec path | ilp path |")
    print("| --- | ---: | --- | --- | --- |")
    for name, cases in sets.items():
        by: dict[str, list[float]] = {"vec": [], "ilp": []}
        errs = []
        for c in cases:
            e = c.predicted_us(hw) / c.measured_us - 1
            errs.append(e)
            by[str(c.predict(hw)[0].detail.get("path"))].append(e)
        print(f"| {name} | {len(cases)} | {_stats(errs)} | {_stats(by['vec'])} | {_stats(by['ilp'])} |")


def launches(hw: Hardware, sets: dict[str, list[Any]]) -> None:
    same = differ = 0
    for cases in sets.values():
        for c in cases:
            kern = [k for k in c.record.get("kernels") or [] if "reduce_kernel" in str(k.get("name", ""))]
            if len(kern) != 1 or not kern[0].get("grid") or not kern[0].get("block"):
                continue
            d = c.predict(hw)[0].detail
            grid = 1
            for g in kern[0]["grid"]:
                grid *= int(g)
            block = 1
            for b in kern[0]["block"]:
                block *= int(b)
            if (grid, block) == (int(d["grid"]), int(d["block"])):
                same += 1
            else:
                differ += 1
    print(f"launch (grid, block): the model's = the profiler's on {same} sums, differs on {differ}")


def chains(hw: Hardware, sets: dict[str, list[Any]]) -> None:
    """Few-block clean row sums: measured time against loop iterations (a line), the profile's iteration."""
    pts: dict[int, list[float]] = {}
    for name in ("l2_cold fit", "l2_cold held", "heldout_w4 clean"):
        for c in sets[name]:
            d = c.predict(hw)[0].detail
            if d.get("path") == "vec" and int(d["grid"]) <= 48:
                pts.setdefault(int(d["iterations"]), []).append(c.measured_us)
    xs = sorted(pts)
    med = [statistics.median(pts[x]) for x in xs]
    if len(xs) >= 2:
        mx, my = statistics.fmean(xs), statistics.fmean(med)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, med, strict=True)) / sum((x - mx) ** 2 for x in xs)
        print("few-block clean row sums (<= 48 blocks), median measured us per iteration count: "
              + ", ".join(f"{x}: {y:.2f} (n {len(pts[x])})" for x, y in zip(xs, med, strict=True)))
        print(f"  line over them: {slope * 1e3:.0f} ns per iteration, intercept {my - slope * mx:.2f} us; profile "
              f"iter_ns_vec_cold {hw.reduce_kernel.get('iter_ns_vec_cold')} ns, entry_ns_vec_cold "
              f"{hw.reduce_kernel.get('entry_ns_vec_cold')} ns")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("profiles", nargs="*", default=["h200-measured"])
    ap.add_argument("--writeback-gbps", type=float, help="price dirty-flush sums with this write-back rate")
    ns = ap.parse_args(argv)
    sets = tables()
    for p in ns.profiles:
        hw = load_profile(p)
        print(f"## {p}")
        report(hw, sets)
        if ns.writeback_gbps:
            print(f"with memory.l2_dirty_writeback_gbps = {ns.writeback_gbps:g}:")
            report(dataclasses.replace(hw, l2_dirty_writeback_bps=ns.writeback_gbps * 1e9), sets)
        launches(hw, sets)
        chains(hw, sets)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
