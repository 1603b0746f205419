"""PyTorch's layer norm and RMS norm forwards at row lengths, row counts and dtypes no fit uses (issue 18:
held-out data for the layer_norm_kernel model, validation/h200/norm_heldout).

The calibration measured F.layer_norm over bf16 rows of 512, 2048, 8192 and 32768 x 1024..16384 columns
(powers of two: reduction, kernel_configs); the wave-2 held-out set (heldout_kernels) 256..65536 rows x 1024,
4096 and 8192. This measures what neither has: row counts 128..49152 that are not powers of two, row lengths
768..12288 that are not, fp32 and fp16 rows, F.rms_norm (ATen's vectorized layer-norm kernel with its RMS
flag, where the installed torch has it), and rows that are not whole 4-element vectors (ATen's two-kernel
fallback: row moments, then normalize), in two L2 states:

- ``clean``: a 256 MB buffer read before each call (the input in HBM, the L2 full of clean lines);
- ``warm``: nothing between calls (the input L2-resident where it fits).

Kernels are timed device-side with torch.profiler as sim.calibrate.gpu.heldout_l2 does (median per kernel over
7 calls; the preparation's own kernels dropped by count); each record keeps the kernel's name, grid, block and
registers, so the validation can check which kernel ATen chose.

    python3 scripts/norm_heldout.py --out DIR [--budget-s S] [--dry-run]

Writes DIR/norm_heldout.json (records: bench reduction, op layer_norm_fwd or rms_norm_fwd, rows, cols, dtype,
l2_state, kernels). stdlib + torch; never changes GPU settings.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sim.calibrate.gpu import common, heldout_l2  # noqa: E402

STATES = ("clean", "warm")
# (op, dtype, cols, row counts): bf16 layer norm at new row lengths and counts; fp32 and fp16 rows; RMS norm;
# rows that are not whole 4-element vectors (ATen's fallback kernels)
CASES = ([("layer_norm", "bfloat16", c, (128, 1536, 6144, 24576)) for c in (768, 2560, 5120, 12288)]
         + [("layer_norm", "bfloat16", c, (384, 3072, 12288, 49152)) for c in (1536, 2048, 3072, 4096, 6144)]
         + [("layer_norm", "float32", c, (384, 3072, 12288)) for c in (1024, 3072, 8192)]
         + [("layer_norm", "float16", c, (1536, 12288)) for c in (2048, 6144)]
         + [("rms_norm", "bfloat16", c, (384, 3072, 12288, 49152)) for c in (1024, 2048, 4096, 8192)]
         + [("layer_norm", "bfloat16", c, (3072, 12288)) for c in (1030, 4098)])


def _norms(c: heldout_l2.L2Ctx) -> None:
    import torch
    import torch.nn.functional as F

    for op, dtype, cols, rows_list in CASES:
        for rows in rows_list:
            def one(op: str = op, dtype: str = dtype, cols: int = cols, rows: int = rows) -> None:
                dt = getattr(torch, dtype)
                x = torch.randn(rows, cols, device="cuda", dtype=dt)
                w = torch.randn(cols, device="cuda", dtype=dt)
                b = torch.randn(cols, device="cuda", dtype=dt)
                if op == "rms_norm":
                    def fn() -> object:
                        return F.rms_norm(x, (cols,), w)
                else:
                    def fn() -> object:
                        return F.layer_norm(x, (cols,), w, b)
                with torch.no_grad():
                    for st in c.states:
                        rec = heldout_l2.profiled_state(fn, st)
                        c.rf.add({"bench": "reduction", "op": f"{op}_fwd", "set": "norm_new", "l2_state": st,
                                  "rows": rows, "cols": cols, "dtype": dtype, **rec})
                common.log(f"{op} {dtype} {rows}x{cols}: " + " ".join(
                    f"{r['l2_state']} {sum(k['duration_us'] for k in r['kernels']):.2f}"
                    for r in c.rf.doc["records"][-len(c.states):]))
            c.attempt(f"{op} {dtype} {rows}x{cols}", one)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="folder for norm_heldout.json")
    ap.add_argument("--budget-s", type=float, default=150.0, help="no new case starts after this many seconds")
    ap.add_argument("--dry-run", action="store_true", help="print the plan; no GPU")
    ns = ap.parse_args(argv)
    if (err := common.budget_error(ns.budget_s)) is not None:
        print(err, file=sys.stderr)
        return 2
    n = sum(len(rows) for _, _, _, rows in CASES)
    if ns.dry_run:
        print(f"{n} norm cases x states {list(STATES)}; budget {ns.budget_s} s; out {ns.out}")
        return 0
    os.makedirs(ns.out, exist_ok=True)
    c = heldout_l2.L2Ctx(ns.out, False, ns.budget_s, group="norm_heldout", states=STATES,
                         meta={"cases": [[op, d, cols, list(rows)] for op, d, cols, rows in CASES]})
    common.warm_gpu(1.0)
    _norms(c)
    c.rf.close("truncated" if c.rf.doc.get("truncated") else "complete")
    return 0


if __name__ == "__main__":
    sys.exit(main())
