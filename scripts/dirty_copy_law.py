"""How much a driver memcpy pays for the dirty lines an L2 flush leaves, by copy size and by how much is dirty
(issue 18; data for the next fit, nothing reads it yet: calibration/h200/dirty_copies).

The held-out sets' copies after the flush that writes a 256 MB buffer measured a clean-to-dirty step that grows
with the copy to ~0.8 us at 6 MiB and ~1.8 us at 20 MiB, then only 3.3-3.9 us at 64-128 MiB
(validation/h200/wave4/heldout_l2, machine AE): the model's write-back, min(HBM bytes, L2) at the GEMM-fitted
rate, gives too little in the middle and too much past L2. This separates the two unknowns: the copy's size and
the dirty bytes the L2 holds when it starts. States, before each profiled call:

- ``clean``: a 256 MB buffer read (L2 full of clean lines);
- ``dirtyNN``: the 256 MB buffer read, then an NN MiB buffer written (about NN MiB of dirty lines, the rest clean);
- ``dirty``: the 256 MB buffer written (common.flush_l2, the held-out sets' flush: L2 all dirty).

Kernels are timed device-side with torch.profiler as sim.calibrate.gpu.heldout_l2 does (median per kernel over
the calls, the preparation's own kernels dropped by count).

    python3 scripts/dirty_copy_law.py --out DIR [--budget-s S] [--dry-run]

Writes DIR/dirty_copies.json (records as heldout_l2's copies: bench copy, l2_state, tensor_bytes, kernels).
stdlib + torch; never changes GPU settings.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sim.calibrate.gpu import common, heldout_l2  # noqa: E402

COPY_KIB = [64, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072]
DIRTY_MIB = [4, 16, 32, 64]
STATES = ("clean", *(f"dirty{m}" for m in DIRTY_MIB), "dirty")

_BUFS: dict[str, Any] = {}


def _prep(state: str) -> Callable[[], None]:
    """What runs before each profiled call in `state` (replaces heldout_l2's, which knows three states)."""
    import torch

    if state == "dirty":
        return common.flush_l2
    if "read" not in _BUFS:
        _BUFS["read"] = torch.ones(common.FLUSH_BYTES // 4, dtype=torch.float32, device="cuda")
        _BUFS["sink"] = torch.empty((), dtype=torch.float32, device="cuda")
    read, sink = _BUFS["read"], _BUFS["sink"]
    if state == "clean":
        def clean() -> None:
            torch.sum(read, dim=0, out=sink)
        return clean
    mib = int(state.removeprefix("dirty"))
    if state not in _BUFS:
        _BUFS[state] = torch.empty(mib * 1024 * 1024 // 4, dtype=torch.int32, device="cuda")
    buf = _BUFS[state]

    def dirty_some() -> None:
        torch.sum(read, dim=0, out=sink)
        buf.zero_()
    return dirty_some


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="folder for dirty_copies.json")
    ap.add_argument("--budget-s", type=float, default=120.0, help="no new copy size starts after this many seconds")
    ap.add_argument("--dry-run", action="store_true", help="print the plan; no GPU")
    ns = ap.parse_args(argv)
    if (err := common.budget_error(ns.budget_s)) is not None:
        print(err, file=sys.stderr)
        return 2
    if ns.dry_run:
        print(f"copies {COPY_KIB} KiB x states {list(STATES)}; budget {ns.budget_s} s; out {ns.out}")
        return 0
    os.makedirs(ns.out, exist_ok=True)
    heldout_l2._prep = _prep  # the profiling loop of heldout_l2 with these states
    c = heldout_l2.L2Ctx(ns.out, False, ns.budget_s, group="dirty_copies", states=STATES,
                         meta={"dirty_mib": DIRTY_MIB, "copy_kib": COPY_KIB})
    common.warm_gpu(1.0)
    heldout_l2._copy(c, COPY_KIB, "law")
    c.rf.close("truncated" if c.rf.doc.get("truncated") else "complete")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
