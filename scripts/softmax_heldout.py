"""PyTorch's softmax forward at row lengths, row counts and dtypes no fit uses (issue 18: held-out data for the
softmax_kernel model, validation/h200/softmax_heldout).

The calibration measured softmax over 1024..16384 bf16 columns only (kernel_configs, reduction): ATen's register
kernel at 4 and 8 loads a thread, its warp kernel at 1024 and 2048, its shared-memory kernel at 16384. This
measures what none of them has: the register kernel at 3, 5, 6, 7 and 9 loads, the warp kernel at 256..1536
columns, the shared-memory kernel at 12288 and 20480, the three-sweep fallback (a row past shared memory, or
not whole 16-byte vectors), and fp32 rows (whose 8192-byte limit moves the warp kernel's bound), each at row
counts the calibration does not use, in two L2 states:

- ``clean``: a 256 MB buffer read before each call (the input in HBM, the L2 full of clean lines);
- ``warm``: nothing between calls (the input L2-resident where it fits).

Kernels are timed device-side with torch.profiler as sim.calibrate.gpu.heldout_l2 does (median per kernel over
7 calls; the preparation's own kernels dropped by count); each record keeps the kernel's name, grid, block and
registers, so the validation can check which kernel ATen chose.

    python3 scripts/softmax_heldout.py --out DIR [--budget-s S] [--dry-run]

Writes DIR/softmax_heldout.json (records: bench reduction, op softmax_fwd, rows, cols, dtype, l2_state,
kernels). stdlib + torch; never changes GPU settings.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sim.calibrate.gpu import common, heldout_l2  # noqa: E402

STATES = ("clean", "warm")
# (dtype, cols, row counts): register kernel at 3, 5, 6, 7, 9 loads (bf16), warp kernel below 2048, shared-memory
# kernel, the fallback (past shared memory; a row that is not whole vectors), fp32 rows (warp bound 2048 elements)
CASES = ([("bfloat16", c, (384, 1536, 6144, 24576)) for c in (2560, 3072, 5120, 6144, 7168, 9216)]
         + [("bfloat16", c, (384, 3072, 24576)) for c in (256, 512, 768, 1536)]
         + [("bfloat16", c, (384, 3072, 12288)) for c in (12288, 20480)]
         + [("bfloat16", c, (384, 3072)) for c in (32768, 12290)]
         + [("float32", c, (384, 3072, 12288)) for c in (1536, 3072, 6144)])


def _softmax(c: heldout_l2.L2Ctx) -> None:
    import torch

    for dtype, cols, rows_list in CASES:
        for rows in rows_list:
            def one(dtype: str = dtype, cols: int = cols, rows: int = rows) -> None:
                x = torch.randn(rows, cols, device="cuda", dtype=getattr(torch, dtype))
                for st in c.states:
                    rec = heldout_l2.profiled_state(lambda: torch.softmax(x, dim=-1), st)
                    c.rf.add({"bench": "reduction", "op": "softmax_fwd", "set": "softmax_new", "l2_state": st,
                              "rows": rows, "cols": cols, "dtype": dtype, **rec})
                common.log(f"softmax {dtype} {rows}x{cols}: " + " ".join(
                    f"{r['l2_state']} {sum(k['duration_us'] for k in r['kernels']):.2f}"
                    for r in c.rf.doc["records"][-len(c.states):]))
            c.attempt(f"softmax {dtype} {rows}x{cols}", one)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="folder for softmax_heldout.json")
    ap.add_argument("--budget-s", type=float, default=120.0, help="no new case starts after this many seconds")
    ap.add_argument("--dry-run", action="store_true", help="print the plan; no GPU")
    ns = ap.parse_args(argv)
    if (err := common.budget_error(ns.budget_s)) is not None:
        print(err, file=sys.stderr)
        return 2
    n = sum(len(rows) for _, _, rows in CASES)
    if ns.dry_run:
        print(f"{n} softmax cases x states {list(STATES)}; budget {ns.budget_s} s; out {ns.out}")
        return 0
    os.makedirs(ns.out, exist_ok=True)
    c = heldout_l2.L2Ctx(ns.out, False, ns.budget_s, group="softmax_heldout", states=STATES,
                         meta={"cases": [[d, cols, list(rows)] for d, cols, rows in CASES]})
    common.warm_gpu(1.0)
    _softmax(c)
    c.rf.close("truncated" if c.rf.doc.get("truncated") else "complete")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
