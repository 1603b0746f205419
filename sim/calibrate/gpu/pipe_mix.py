"""Issue 18, held-out set: what one thread's elements and the instruction mix cost at full occupancy.

The register sweep (calibration) times only the fused bias+GELU+dropout *forward* and fixes, on it,
two numbers of the elementwise model: instructions a thread pays once whatever elements it holds
(program id, offsets, masks: spread over its elements) and the share of the FP32 and INT32 pipes'
cycles that overlap. This measures kernels whose mix differs, at a shape no fit uses (4096 tokens x
hidden 12288, 50 M bf16 elements: hundreds of waves, compute-bound), so they test both numbers:

- ``dropout``: Philox + select only (INT pipe; no FP32 work to overlap);
- ``gelu``: erf only (FP32 pipe; nothing on the INT pipe);
- ``bgd_fwd``, ``bgd_bwd``: the fused forward and backward (both pipes; the backward has more FP32).

Each at 4 warps per block and BLOCK 128..4096 (1..32 elements per thread). Records ``bench:
pipe_mix``, ``set: heldout``, timed as the register sweep (common.bench, L2 flushed, CUDA events).

    python3 -m sim.calibrate.gpu.pipe_mix --out DIR [--budget-s S] [--smoke] [--dry-run]

Writes DIR/pipe_mix.json. stdlib + torch + triton; never changes GPU settings.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from typing import Any

from . import common

TOKENS = 4096
HIDDEN = 12288
P_DROP = 0.1
WARPS = 4
BLOCKS = (128, 256, 512, 1024, 2048, 4096)
KERNELS = ("dropout", "gelu", "bgd_fwd", "bgd_bwd")


def plan(smoke: bool = False) -> list[tuple[str, int]]:
    """(kernel, BLOCK) in the order they run: each kernel's whole BLOCK curve, then the next kernel."""
    out = [(k, b) for k in KERNELS for b in BLOCKS]
    return out[:2] if smoke else out


class Ctx:
    def __init__(self, out: str, smoke: bool, budget_s: float) -> None:
        self.rf = common.ResultFile(os.path.join(out, "pipe_mix.json"), "pipe_mix",
                                    common.collect_meta({"mode": "smoke" if smoke else "full", "tokens": TOKENS,
                                                         "hidden": HIDDEN}))
        self.deadline = time.time() + budget_s

    def attempt(self, where: str, fn: Callable[[], Any]) -> Any:
        if time.time() > self.deadline:
            self.rf.doc["truncated"] = True
            return None
        return common.guarded(self.rf, where, fn)


def _launcher(kernel: str, bufs: dict[str, Any], block: int) -> Callable[[], Any]:
    from . import triton_kernels as K

    h, b, gy, y = bufs["h"], bufs["b"], bufs["gy"], bufs["y"]
    if kernel == "dropout":
        return lambda: K.launch_dropout(h, y, P_DROP, 7, BLOCK=block, num_warps=WARPS)
    if kernel == "gelu":
        return lambda: K.launch_gelu(h, y, BLOCK=block, num_warps=WARPS)
    if kernel == "bgd_fwd":
        return lambda: K.launch_bgd_fwd(h, b, y, P_DROP, 7, BLOCK=block, num_warps=WARPS)
    return lambda: K.launch_bgd_bwd(gy, h, b, y, P_DROP, 7, BLOCK=block, num_warps=WARPS)


# bytes moved per element (bf16): reads and writes of each kernel (the bias vector stays in cache)
BYTES_PER_ELEMENT = {"dropout": 4, "gelu": 4, "bgd_fwd": 4, "bgd_bwd": 6}


def run(c: Ctx, cases: list[tuple[str, int]]) -> None:
    import torch

    numel = TOKENS * HIDDEN
    bufs = {"h": torch.randn(numel, device="cuda", dtype=torch.bfloat16),
            "gy": torch.randn(numel, device="cuda", dtype=torch.bfloat16),
            "b": torch.randn(HIDDEN, device="cuda", dtype=torch.bfloat16),
            "y": torch.empty(numel, device="cuda", dtype=torch.bfloat16)}
    for kernel, block in cases:
        def one(kernel: str = kernel, block: int = block) -> None:
            launch = _launcher(kernel, bufs, block)
            ck, grid = launch()
            info = common.triton_kernel_info(ck)
            r = common.bench(lambda i: launch(), flush=True, warmup_ms=10.0, rep_ms=30.0, min_reps=10, max_reps=100)
            rec = {"bench": "pipe_mix", "set": "heldout", "kernel": kernel, "tokens": TOKENS, "hidden": HIDDEN,
                   "numel": numel, "dtype": "bfloat16", "p": P_DROP, "BLOCK": block, "num_warps": WARPS,
                   "elements_per_thread": block / (32 * WARPS), "grid": list(grid),
                   "bytes": BYTES_PER_ELEMENT[kernel] * numel, **info, **common.occupancy_estimate(info.get("n_regs"), WARPS), **r}
            c.rf.add(rec)
            common.log(f"{kernel} BLOCK={block}: regs {info.get('n_regs')} spills {info.get('n_spills')} "
                       f"grid {grid[0]} {r['time_us']:.2f} us")
        c.attempt(f"{kernel} BLOCK={block}", one)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--smoke", action="store_true", help="two cases")
    ap.add_argument("--budget-s", type=float, default=60.0, help="no new case starts after this many seconds")
    ap.add_argument("--dry-run", action="store_true", help="parse the arguments and print the plan; no GPU")
    ns = ap.parse_args(argv)
    if ns.budget_s <= 0:
        print(f"error: --budget-s: {ns.budget_s} (expected a positive number of seconds)")
        return 2
    cases = plan(ns.smoke)
    if ns.dry_run:
        print(f"{len(cases)} cases ({len(KERNELS)} kernels x {len(BLOCKS)} BLOCKs at {WARPS} warps, "
              f"{TOKENS}x{HIDDEN}); budget {ns.budget_s} s; out {ns.out}")
        return 0
    os.makedirs(ns.out, exist_ok=True)
    c = Ctx(ns.out, ns.smoke, ns.budget_s)
    common.warm_gpu(1.0)
    t0 = time.time()
    run(c, cases)
    common.log(f"pipe_mix: {len(c.rf.doc['records'])} records, {time.time() - t0:.1f} s")
    c.rf.close("truncated" if c.rf.doc.get("truncated") else "complete")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
