"""Calibrated residual tables: measured / model time at calibrated shapes, applied near them.

Some libraries pick a different kernel per shape (cuBLAS, cuDNN attention); what the
analytic model cannot know is kept as a table of ratios from the training split of the
calibration data, interpolated by inverse distance in log2 space among the nearest points
within `radius` (in log2 units per dimension, combined). Far from every point the ratio is
1: the analytic model stands alone rather than extrapolating a far-away measurement.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

DEFAULT_RADIUS = 1.5


def interpolate(points: Iterable[tuple[Sequence[float], float]], x: Sequence[float], radius: float = DEFAULT_RADIUS) -> float:
    lx = [math.log2(max(v, 1.0)) for v in x]
    scored = []
    for px, ratio in points:
        d2 = sum((a - math.log2(max(b, 1.0))) ** 2 for a, b in zip(lx, px, strict=True))
        if d2 < 1e-12:
            return ratio
        if d2 <= radius**2:
            scored.append((d2, ratio))
    if not scored:
        return 1.0
    scored.sort()
    near = scored[:4]
    wsum = sum(1.0 / d for d, _ in near)
    return sum(r / d for d, r in near) / wsum
