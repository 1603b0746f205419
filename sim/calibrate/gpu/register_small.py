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

    python3 -m sim.calibrate.gpu.register_small --out DIR [--budget-s S] [--smoke] [--dry-run]

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


def plan(smoke: bool = False) -> list[tuple[str, int, int, int]]:
    """(part, tokens, BLOCK, num_warps) in the order they run: small grids first."""
    out = []
    for tokens in SMALL_TOKENS:
        for warps in WARPS:
            for block in SMALL_BLOCKS:
                ept = block / (32 * warps)
                if 1 <= ept <= 128:
                    out.append(("small", tokens, block, warps))
    for block in W16_BLOCKS:
        for tokens in W16_TOKENS:
            out.append(("w16", tokens, block, 16))
    return out[:2] if smoke else out


def _occupancy(n_regs: int | None, num_warps: int) -> dict[str, Any]:
    if not n_regs:
        return {}
    regs_per_warp = -(-n_regs * 32 // 256) * 256
    blocks = max(0, min(65536 // (regs_per_warp * num_warps), 64 // num_warps, 32))
    return {"blocks_per_sm_est": blocks, "warps_per_sm_est": blocks * num_warps, "occupancy_est": blocks * num_warps / 64}


class Ctx(common.BudgetedAttempts):
    def __init__(self, out: str, smoke: bool, budget_s: float) -> None:
        super().__init__(common.ResultFile(os.path.join(out, "register_small.json"), "register_small",
                                           common.collect_meta({"mode": "smoke" if smoke else "full",
                                                                "hidden": HIDDEN})), budget_s)


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
                   **_occupancy(info.get("n_regs"), warps), **r}
            rec["gbps"] = rec["bytes"] / (r["time_us"] * 1e-6) / 1e9
            c.rf.add(rec)
            common.log(f"{part} T={tokens} BLOCK={block} w={warps}: regs {info.get('n_regs')} spills "
                       f"{info.get('n_spills')} grid {grid[0]} {r['time_us']:.2f} us")
        c.attempt(f"{part} T={tokens} BLOCK={block} w={warps}", one)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--smoke", action="store_true", help="two cases")
    ap.add_argument("--budget-s", type=float, default=55.0, help="no new case starts after this many seconds")
    ap.add_argument("--dry-run", action="store_true", help="parse the arguments and print the plan; no GPU")
    ns = ap.parse_args(argv)
    if ns.budget_s <= 0:
        print(f"error: --budget-s: {ns.budget_s} (expected a positive number of seconds)")
        return 2
    cases = plan(ns.smoke)
    if ns.dry_run:
        print(f"{len(cases)} cases ({sum(1 for c in cases if c[0] == 'small')} small-grid, "
              f"{sum(1 for c in cases if c[0] == 'w16')} 16-warp); budget {ns.budget_s} s; out {ns.out}")
        return 0
    os.makedirs(ns.out, exist_ok=True)
    c = Ctx(ns.out, ns.smoke, ns.budget_s)
    common.warm_gpu(1.0)
    t0 = time.time()
    run(c, cases)
    common.log(f"register_small: {len(c.rf.doc['records'])} records, {time.time() - t0:.1f} s")
    c.rf.close("truncated" if c.rf.doc.get("truncated") else "complete")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
