"""Kernel groups that profile fits need and the microbenchmarks do not measure.

    python3 -m sim.calibrate.gpu.fit_groups --out DIR [--budget-s S]

Writes, with the held-out harness's method (sim.calibrate.gpu.heldout_kernels):
- DIR/attention_default.json (group attention_default): F.scaled_dot_product_attention with the
  default backend (cuDNN on the H200 with torch 2.11) at the fit shapes
  heldout_kernels.ATTENTION_FIT_SHAPES, head_dim 64/128, causal or not, forward and backward:
  event-timed medians plus the profiled kernels (name, duration, grid). Read by
  sim.calibrate.attention_fit.
- DIR/math_ops.json (group math_ops): the Triton kernel applying one math op K = 1, 4, 16 times per
  element (bench math_k). Read by sim.calibrate.unit_fit.fit_math_ops.
- DIR/register_small.json (group register_small): the register sweep's kernel on small grids, only
  the configs whose spills overflow L1, and with 16-warp blocks (sim.calibrate.gpu.register_small
  --fit-only). Read by sim.calibrate.unit_fit (fit_spills, and the knee and instruction fits). Measured here rather than in its own process: one torch/Triton
  start and GPU warm-up less (about 6 s of a full calibration's 5 minutes).
Before the second wave the first two groups were copied out of a held-out run by hand; a calibration
now measures them itself (about 45 s on an H200, machine W: 12 + 15 + about 15 s).
"""

from __future__ import annotations

import argparse
import os
import time

from . import common


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="raw folder to write")
    ap.add_argument("--budget-s", type=float, default=80.0, help="stop starting new measurements after this")
    ns = ap.parse_args(argv)
    os.makedirs(ns.out, exist_ok=True)
    import torch

    from . import heldout_kernels as H

    torch.backends.cuda.matmul.allow_tf32 = False
    deadline = time.time() + ns.budget_s
    common.warm_gpu(1.0)
    att = H.Ctx(ns.out, False, max(deadline - time.time(), 1.0), group="attention_default")
    t0 = time.time()
    att.attempt("attention", lambda: H.run_attention(att, shapes=list(H.ATTENTION_FIT_SHAPES)))
    att.rf.close("truncated" if att.rf.doc.get("truncated") else "complete")
    common.log(f"attention_default: {len(att.rf.doc['records'])} records, {time.time() - t0:.1f} s")
    math = H.Ctx(ns.out, False, max(deadline - time.time(), 1.0), group="math_ops")
    t0 = time.time()
    math.attempt("math", lambda: H.run_math(math, eager=False))
    math.rf.close("truncated" if math.rf.doc.get("truncated") else "complete")
    common.log(f"math_ops: {len(math.rf.doc['records'])} records, {time.time() - t0:.1f} s")
    from . import register_small

    register_small.measure(ns.out, max(deadline - time.time(), 1.0), fit_only=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
