"""Issue 18, calibration split: the register sweep's kernel on small grids and with 16-warp blocks.

The calibration register sweep (groups_memory.run_register_sweep) times the Triton bias+GELU+dropout
forward at hidden 16384 and 128/2048/16384 tokens with 1-8 warps per block: its smallest grids still
give every SM 4 or more blocks, and no config has 16 warps. A model of partial residency (1-2 blocks
per SM, a latency-bound tail) and of large blocks needs both. This measures, at the calibration
hidden size (16384; no held-out set uses it):

- ``small``: 8 and 32 tokens (grids of 8-2048 blocks) at BLOCK 256-16384 x 1/2/4/8/16 warps;
- ``w16``: 16 warps per block at 128 and 2048 tokens, BLOCK 512-16384.

Records have the register sweep's fields (``bench: register_sweep``) plus ``set: cal`` and ``part``,
timed as that sweep is (common.bench with an L2 flush before each call, CUDA events).

``--fit-only`` (what a full calibration runs, inside sim.calibrate.gpu.fit_groups) measures only the
configs the shipped fits read: the small-grid FIT_CONFIGS, whose spills overflow L1 (the off-chip spill
ceiling and in-flight bytes of sim.calibrate.unit_fit.fit_spills), and the 16-warp part (the latency-hiding
knee and the instruction fits read both register groups: unit_fit.KNEE_GROUPS). The other small-grid configs
are read by no shipped fit, and the spilling builds are most of their time (4-5 s of Triton compile each,
machine W).

    python3 -m sim.calibrate.gpu.register_small --out DIR [--budget-s S] [--fit-only] [--smoke] [--dry-run]

Writes DIR/register_small.json. stdlib + torch + triton; never changes GPU settings.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

from . import common

HIDDEN = 16384
P_DROP = 0.1
OPS = {"erf": 1, "rng": 1, "fp32": 8}  # as groups_memory.OPS["bias_gelu_dropout_fwd"]
SMALL_TOKENS = (8, 32)
SMALL_BLOCKS = (256, 1024, 2048, 4096, 8192, 16384)
WARPS = (1, 2, 4, 8, 16)
W16_TOKENS = (128, 2048)
W16_BLOCKS = (512, 1024, 2048, 4096, 8192, 16384)
# (BLOCK, num_warps) of the small grids whose spills overflow L1: 128 elements per thread, built by
# Triton 3.6 with 32 registers and 1084-1094 spilled words per thread (calibration/h200/raw and runs/W).
# Their training-split records are the only register_small records the shipped fits read
# (unit_fit.fit_spills). BLOCK 4096 x 1 warp overflows L1 too, but both its small-grid records fall in
# the held-out split (raw.held_out: by input identity, the same on every machine), which no fit reads.
FIT_CONFIGS = ((8192, 2), (16384, 4))


def plan(smoke: bool = False, fit_only: bool = False) -> list[tuple[str, int, int, int]]:
    """(part, tokens, BLOCK, num_warps) in the order they run: small grids first; with `fit_only`,
    only the small-grid FIT_CONFIGS."""
    out = []
    for tokens in SMALL_TOKENS:
        for warps in WARPS:
            for block in SMALL_BLOCKS:
                ept = block / (32 * warps)
                if 1 <= ept <= 128 and (not fit_only or (block, warps) in FIT_CONFIGS):
                    out.append(("small", tokens, block, warps))
    # the 16-warp configs: the shipped latency-hiding knee and instruction fits read them (the one at 2048 tokens,
    # BLOCK 8192, is the knee fit's only config at 4 warps per scheduler). Without them fresh calibrations fitted
    # n 8 / W 2.4 (wave21_AF, wave22_AG); AF's raw folder with 12 of them measured on another machine refits to the
    # shipped 3 / 2.0 (calibration/h200/fit_groups_w16_20261203). So the fit plan has them too.
    for block in W16_BLOCKS:
        for tokens in W16_TOKENS:
            out.append(("w16", tokens, block, 16))
    return out[:2] if smoke else out


class Ctx(common.BudgetedAttempts):
    def __init__(self, out: str, smoke: bool, budget_s: float, fit_only: bool = False) -> None:
        mode = "smoke" if smoke else "fit_only" if fit_only else "full"
        super().__init__(common.ResultFile(os.path.join(out, "register_small.json"), "register_small",
                                           common.collect_meta({"mode": mode, "hidden": HIDDEN})), budget_s)


def run(c: Ctx, cases: list[tuple[str, int, int, int]]) -> None:
    import torch

    from . import triton_kernels as K

    data = {}
    for tokens in sorted({t for _, t, _, _ in cases}):
        numel = tokens * HIDDEN
        data[tokens] = (torch.randn(numel, device="cuda", dtype=torch.bfloat16),
                        torch.randn(HIDDEN, device="cuda", dtype=torch.bfloat16),
                        torch.empty(numel, device="cuda", dtype=torch.bfloat16))
    for part, tokens, block, warps in cases:
        h, b, y = data[tokens]

        def one(part: str = part, tokens: int = tokens, block: int = block, warps: int = warps,
                h: Any = h, b: Any = b, y: Any = y) -> None:
            numel = h.numel()
            ck, grid = K.launch_bgd_fwd(h, b, y, P_DROP, 7, BLOCK=block, num_warps=warps)
            info = common.triton_kernel_info(ck)
            r = common.bench(lambda i: K.launch_bgd_fwd(h, b, y, P_DROP, 7, BLOCK=block, num_warps=warps),
                             flush=True, warmup_ms=10.0, rep_ms=40.0, min_reps=10, max_reps=100)
            rec = {"bench": "register_sweep", "set": "cal", "part": part, "kernel": "bias_gelu_dropout_fwd",
                   "tokens": tokens, "hidden": HIDDEN, "numel": numel, "dtype": "bfloat16", "math": "fp32",
                   "p": P_DROP, "BLOCK": block, "num_warps": warps, "elements_per_thread": block / (32 * warps),
                   "grid": list(grid), "bytes": 4 * numel + 2 * HIDDEN, "ops_per_element": OPS, **info,
                   **common.occupancy_estimate(info.get("n_regs"), warps), **r}
            rec["gbps"] = rec["bytes"] / (r["time_us"] * 1e-6) / 1e9
            c.rf.add(rec)
            common.log(f"{part} T={tokens} BLOCK={block} w={warps}: regs {info.get('n_regs')} spills "
                       f"{info.get('n_spills')} grid {grid[0]} {r['time_us']:.2f} us")
        c.attempt(f"{part} T={tokens} BLOCK={block} w={warps}", one)


def measure(out: str, budget_s: float, smoke: bool = False, fit_only: bool = False) -> None:
    """Measure the plan into OUT/register_small.json (the GPU already warm)."""
    c = Ctx(out, smoke, budget_s, fit_only)
    t0 = time.time()
    run(c, plan(smoke, fit_only))
    common.log(f"register_small: {len(c.rf.doc['records'])} records, {time.time() - t0:.1f} s")
    c.rf.close("truncated" if c.rf.doc.get("truncated") else "complete")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--smoke", action="store_true", help="two cases")
    ap.add_argument("--fit-only", action="store_true",
                    help="only the configs the shipped fits read (FIT_CONFIGS and the 16-warp part)")
    ap.add_argument("--budget-s", type=float, default=55.0, help="no new case starts after this many seconds")
    ap.add_argument("--dry-run", action="store_true", help="parse the arguments and print the plan; no GPU")
    ns = ap.parse_args(argv)
    if ns.budget_s <= 0:
        print(f"error: --budget-s: {ns.budget_s} (expected a positive number of seconds)")
        return 2
    cases = plan(ns.smoke, ns.fit_only)
    if ns.dry_run:
        print(f"{len(cases)} cases ({sum(1 for c in cases if c[0] == 'small')} small-grid, "
              f"{sum(1 for c in cases if c[0] == 'w16')} 16-warp); budget {ns.budget_s} s; out {ns.out}")
        return 0
    os.makedirs(ns.out, exist_ok=True)
    common.warm_gpu(1.0)
    measure(ns.out, ns.budget_s, ns.smoke, ns.fit_only)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
