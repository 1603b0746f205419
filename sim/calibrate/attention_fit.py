"""Fit a fused-attention backend (the one PyTorch's SDPA picks by default) from profiled kernels:
the matmuls' tensor-core efficiency and the per-score-element softmax time, forward and
backward (sim.costmodel.attention). CPU only: reads the raw `attention_default` group."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from sim.calibrate.raw import RawData


def _backend_of(records: list[dict[str, Any]]) -> str | None:
    names = " ".join(str(k.get("name", "")) for r in records for k in r.get("kernels") or [])
    if "cudnn" in names:
        return "cudnn"
    if "flash" in names:
        return "flash"
    return None


KEY_TILES = (128, 256)  # causal key-tile candidates (Hopper fused-attention kernels use one of these)
BOOTSTRAP_RESAMPLES = 40
BOOTSTRAP_SEED = 20261130


def fit_attention_backend(raw: RawData, hw: Any
                          ) -> tuple[str, dict[str, float], int, dict[str, tuple[float, float]]] | None:
    """(backend, {tc_efficiency, score_ns_fwd, score_ns_bwd, causal_key_tile}, records used) by
    least squares on log time over the group's profiled kernels, the key tile being the candidate
    with the smaller fit cost, and a 90 % bootstrap interval per fitted number (cases resampled,
    fixed seed, key tile kept); None when the raw folder has no such group."""
    import random

    import numpy as np
    from scipy.optimize import least_squares

    from sim.calibrate.heldout_cases import heldout_case

    recs = [r for r in raw.records("attention_default") if r.get("bench") == "attention"]
    backend = _backend_of(recs)
    if not recs or backend is None:
        return None
    cases = [c for c in (heldout_case(r) for r in recs) if c is not None]
    measured = np.array([c.measured_us for c in cases])

    def solve(sel: list[int], tile: int) -> Any:
        def residuals(p: Any) -> Any:
            eff, cf, cb = (float(x) for x in p)
            h = dataclasses.replace(hw, attention_backends={backend: (eff, cf * 1e-9, cb * 1e-9, tile)},
                                    attention_default_backend=backend)
            pred = np.array([cases[i].predicted_us(h) for i in sel])
            return np.log(pred / measured[sel])

        return least_squares(residuals, x0=[0.7, 0.05, 0.1], bounds=([0.05, 0.0, 0.0], [1.0, 10.0, 10.0]))

    every = list(range(len(cases)))
    best: tuple[float, int, Any] | None = None
    for tile in KEY_TILES:
        fit = solve(every, tile)
        if best is None or float(fit.cost) < best[0]:
            best = (float(fit.cost), tile, fit.x)
    assert best is not None
    eff, cf, cb = (float(x) for x in best[2])
    if not all(math.isfinite(v) for v in (eff, cf, cb)):
        return None
    rng = random.Random(BOOTSTRAP_SEED)
    boots = [solve([rng.randrange(len(cases)) for _ in every], best[1]).x for _ in range(BOOTSTRAP_RESAMPLES)]
    names = ("tc_efficiency", "score_ns_fwd", "score_ns_bwd")
    spread = {}
    for j, name in enumerate(names):
        vals = sorted(float(b[j]) for b in boots)
        lo, hi = vals[int(0.05 * (len(vals) - 1))], vals[int(round(0.95 * (len(vals) - 1)))]
        v = (eff, cf, cb)[j]
        spread[name] = (round(min(lo, v), 4), round(max(hi, v), 4))
    values = {"tc_efficiency": round(eff, 4), "score_ns_fwd": round(cf, 4), "score_ns_bwd": round(cb, 4),
              "causal_key_tile": best[1]}
    return backend, values, len(cases), spread
