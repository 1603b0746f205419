"""Elementwise figures on the wave-2 held-out kernels (validation/h200/heldout_kernels/*.json).

Usage: python scripts/heldout_elementwise.py [PROFILE] [-v]

Per machine file and family (fused_heldout: Triton bias+GELU+dropout over BLOCK/warps/tokens/
hidden; math_heldout: torch's eager unary math kernels) the median / p90 / max |error|; and for
the fused kernels, per (kernel, hidden, tokens) bucket, whether the config predicted fastest is
within 5 % of the measured fastest, and how many config pairs whose measured times differ by more
than 5 % the model orders right. -v prints every case.
"""

from __future__ import annotations

import statistics
import sys
from itertools import combinations
from pathlib import Path

from sim.calibrate.heldout_cases import heldout_cases
from sim.hardware import load_profile

ROOT = Path(__file__).resolve().parent.parent
FAMILIES = ("fused_heldout", "math_heldout")


def quantile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def main(argv: list[str]) -> int:
    args = [a for a in argv if not a.startswith("-")]
    verbose = "-v" in argv
    hw = load_profile(args[0] if args else "h200-measured")
    for path in sorted((ROOT / "validation" / "h200" / "heldout_kernels").glob("*.json")):
        errs: dict[str, list[float]] = {f: [] for f in FAMILIES}
        buckets: dict[tuple[str, int, int], list[tuple[float, float, str]]] = {}
        for case in heldout_cases(path):
            if case.family not in FAMILIES:
                continue
            pred = case.predicted_us(hw)
            err = pred / case.measured_us - 1
            errs[case.family].append(abs(err))
            if verbose:
                print(f"{path.stem} {case.label:60s} measured {case.measured_us:9.1f} predicted {pred:9.1f} {err:+7.1%}")
            if case.family == "fused_heldout":
                r = case.record
                key = (str(r["kernel"]), int(r["hidden"]), int(r["tokens"]))
                buckets.setdefault(key, []).append((case.measured_us, pred, f"B{r['BLOCK']}/w{r['num_warps']}"))
        for fam, es in errs.items():
            if es:
                print(f"{path.stem} {fam:14s} n={len(es):3d} median {statistics.median(es):6.1%} "
                      f"p90 {quantile(es, 0.9):6.1%} max {max(es):6.1%}")
        best_ok = pairs = pairs_ok = 0
        for rows in buckets.values():
            fastest = min(r[0] for r in rows)
            chosen = min(rows, key=lambda r: (r[1], r[2]))
            best_ok += chosen[0] <= 1.05 * fastest
            for a, b in combinations(rows, 2):
                if max(a[0], b[0]) > 1.05 * min(a[0], b[0]):
                    pairs += 1
                    pairs_ok += (a[0] < b[0]) == (a[1] < b[1])
        if buckets:
            print(f"{path.stem} fused ranking: predicted-fastest config within 5 % of the measured fastest in "
                  f"{best_ok}/{len(buckets)} buckets; config pairs differing by > 5 % ordered right: {pairs_ok}/{pairs}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
