"""The cold-L2 calibration group: small-M GEMMs, sums and copies at calibration-split shapes, profiled
after a read-only L2 flush (and, for reference, after a dirtying flush and with a warm L2).

    python3 -m sim.calibrate.gpu.l2_cold --out DIR [--budget-s S] [--states LIST] [--smoke] [--dry-run]

The shipped calibration/h200/raw/l2_cold.json holds sim.calibrate.gpu.heldout_l2's records of set
``cal`` (the parts gemm_cal, sum_cal, copy_cal); this measures those parts with the same code and (since
2026-12-02) row_sum_cal: three few-block row sums of 20-44 loop iterations that separate the cold loop's
iteration from its entry (the fit reads them where a raw folder has them) and, since 2026-12-02 too, norm_cal:
layer norm and RMS norm forwards in every L2 state (profile layer_norm_kernel) and, since 2026-12-03,
norm_bwd_cal: their backwards, clean and warm (layer_norm_kernel's bwd_* and gb_* keys), and softmax_cal: softmax
forwards on ATen's warp kernel, clean and warm (softmax_kernel's warp_* keys), and norm_fallback_cal: layer norms over
rows that are not whole vectors, clean and warm (layer_norm_kernel's fb_* keys), and softmax_bwd_cal: softmax
backwards, clean and warm (softmax_kernel's bwd_* keys). It writes them as
DIR/l2_cold.json (group ``l2_cold``), which the fits of kernel.memcpy_clean_fixed_us, gemm.cold_ramp_us
and the cold reduction kernels read (sim/calibrate/fit.py; only the ``clean`` records
are fitted). It never measures the held-out sets (``w3``, ``new``): those shapes stay unseen by any fit.
stdlib + torch; never changes GPU settings.
"""

from __future__ import annotations

import argparse
import os

from . import heldout_l2

CAL_PARTS = ("gemm_cal", "sum_cal", "copy_cal", "row_sum_cal", "norm_cal", "norm_bwd_cal", "norm_fallback_cal",
             "softmax_cal", "softmax_bwd_cal")
GROUP = "l2_cold"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="raw folder; writes OUT/l2_cold.json")
    ap.add_argument("--budget-s", type=float, default=40.0, help="no new case starts after this many seconds")
    ap.add_argument("--states", default=",".join(heldout_l2.STATES),
                    help="L2 states to measure each case in (the fits read 'clean')")
    ap.add_argument("--smoke", action="store_true", help="one case per part")
    ap.add_argument("--dry-run", action="store_true", help="parse the arguments and print the plan; no GPU")
    ns = ap.parse_args(argv)
    states = tuple(s for s in ns.states.split(",") if s)
    bad = [s for s in states if s not in heldout_l2.STATES]
    if bad or not states:
        print(f"error: --states: '{ns.states}' (expected some of {', '.join(heldout_l2.STATES)})")
        return 2
    if ns.budget_s <= 0:
        print(f"error: --budget-s: {ns.budget_s} (expected a positive number of seconds)")
        return 2
    cases = (len(heldout_l2.CAL_GEMM) + 2 * len(heldout_l2.CAL_SUM) + len(heldout_l2.CAL_COPY_KIB)
             + len(heldout_l2.CAL_ROW_SUM) + 2 * len(heldout_l2.CAL_NORM) + 2 * len(heldout_l2.CAL_NORM_BWD)
             + len(heldout_l2.CAL_NORM_FALLBACK) + len(heldout_l2.CAL_SOFTMAX) + len(heldout_l2.CAL_SOFTMAX_BWD))
    if ns.dry_run:
        print(f"parts {list(CAL_PARTS)}; cases {cases} x states {list(states)}; budget {ns.budget_s} s; "
              f"out {os.path.join(ns.out, GROUP + '.json')}")
        return 0
    os.makedirs(ns.out, exist_ok=True)
    ctx = heldout_l2.L2Ctx(ns.out, ns.smoke, ns.budget_s, group=GROUP, states=states,
                           meta={"parts": list(CAL_PARTS), "sets": ["cal"]})
    heldout_l2.measure(ctx, list(CAL_PARTS))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
