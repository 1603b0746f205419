"""Spill time as a floor per wave of resident blocks, composed with the compute/memory time (issue 18, gpu14)

    python scripts/spill_wave_floor_check.py [--profile h200-measured] [--rows]

The shipped rule adds a spilling kernel's spill time to its body: fixed + max(compute, memory) + spill
(sim.costmodel.elementwise.streaming_cost). The held-out l1_edge configs (backward kernels at 64 elements per
thread) run slower than that on every held-out machine, most where the grid fills the GPU (docs/spills.md). This
prices every spilling config of sim.validate.spills' sources under compositions that treat the spill time as a
floor per wave of resident blocks instead of a sum, each with its one constant fitted (least squares, log time)
on the shipped raw folder's spilling register configs only (source `calibration`; the others are held out:
`calibration M` by machine, A, C, F and w4 by machine and shape), and prints per source and regime the median
|error| and the signed range. W is the model's number of waves (blocks over resident blocks x SMs, rounded up),
w the same unrounded (at least 1), b the body, s the spill time as priced, T the traffic per thread (ptxas):

- `sum`: fixed + b + s (shipped);
- `max + W F`: fixed + max(b, s) + W x F (the spill's own time overlaps the body; F a latency per wave);
- `max + w F`: the same with fractional waves;
- `W max(sum/W, F)`: each wave at least F;
- `W max(max/W, F)`: each wave at least F, the spill overlapping the body;
- `W max(sum/W, k T)`: each wave at least k x the local traffic per thread (a chain of local accesses);
- `W max(max/W, k T)`: the same, the spill overlapping the body.

The body and spill time come from the cost model itself (the spill time read where streaming_cost computes it);
only reads committed data.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import sim.costmodel.elementwise as elementwise  # noqa: E402
from sim.hardware import Hardware, load_profile  # noqa: E402
from sim.validate.spills import REGIMES, regime, spill_sources  # noqa: E402

TRAIN = "calibration"
SOURCES = ("calibration", "calibration M", "A", "C", "F", "w4")


@dataclass(frozen=True)
class Parts:
    source: str
    regime: str
    label: str
    measured_us: float
    edge_us: float  # the record's timing edge (predicted - kernel time)
    fixed_us: float
    body_us: float
    spill_us: float
    waves: int
    frac_waves: float
    traffic_per_thread: float


@contextmanager
def _spill_spy(seen: dict[str, float]) -> Any:
    orig = elementwise.spill_time

    def spy(*args: Any, **kwargs: Any) -> tuple[float, float]:
        out = orig(*args, **kwargs)
        seen["spill_s"] = out[0]
        return out

    elementwise.spill_time = spy  # type: ignore[assignment]
    try:
        yield
    finally:
        elementwise.spill_time = orig  # type: ignore[assignment]


def parts(hw: Hardware) -> list[Parts]:
    out = []
    seen: dict[str, float] = {}
    with _spill_spy(seen):
        for source, cases in spill_sources(ROOT).items():
            for c in cases:
                seen.clear()
                k = c.predict(hw)[0]
                pred = c.predicted_us(hw)
                d = k.detail
                spill = seen.get("spill_s", 0.0) * 1e6
                time = k.time_s * 1e6
                fixed = hw.kernel_fixed_s * 1e6
                slots = float(d["blocks_per_sm"]) * hw.sm_count  # type: ignore[arg-type]
                launch = c.graph.ops[0].launch
                rec = c.record
                out.append(Parts(source, regime(c, hw),
                                 f"{rec.get('kernel')} BLOCK {rec.get('BLOCK')} x {rec.get('num_warps')} grid {d['grid']}",
                                 c.measured_us, pred - time, fixed, time - fixed - spill, spill, int(d["waves"]),  # type: ignore[arg-type]
                                 max(1.0, float(d["grid"]) / slots),  # type: ignore[arg-type]
                                 float((launch.spill_traffic_bytes_per_thread if launch else 0) or 0)))
    return out


Rule = Callable[[Parts, float], float]
RULES: dict[str, tuple[Rule, list[float], str]] = {
    "sum": (lambda p, _: p.body_us + p.spill_us, [0.0], ""),
    "max + W F": (lambda p, f: max(p.body_us, p.spill_us) + p.waves * f, [0.1 * i for i in range(400)], "F us"),
    "max + w F": (lambda p, f: max(p.body_us, p.spill_us) + p.frac_waves * f, [0.1 * i for i in range(400)], "F us"),
    "W max(sum/W, F)": (lambda p, f: p.waves * max((p.body_us + p.spill_us) / p.waves, f),
                        [0.1 * i for i in range(400)], "F us"),
    "W max(max/W, F)": (lambda p, f: p.waves * max(max(p.body_us, p.spill_us) / p.waves, f),
                        [0.1 * i for i in range(400)], "F us"),
    "W max(sum/W, k T)": (lambda p, k: p.waves * max((p.body_us + p.spill_us) / p.waves, k * 1e-3 * p.traffic_per_thread),
                          [0.1 * i for i in range(200)], "k ns/B"),
    "W max(max/W, k T)": (lambda p, k: p.waves * max(max(p.body_us, p.spill_us) / p.waves, k * 1e-3 * p.traffic_per_thread),
                          [0.1 * i for i in range(200)], "k ns/B"),
}


def predicted(p: Parts, rule: Rule, c: float) -> float:
    return p.edge_us + p.fixed_us + rule(p, c)


def fit(rule: Rule, grid: list[float], train: list[Parts]) -> float:
    return min(grid, key=lambda c: (sum(math.log(predicted(p, rule, c) / p.measured_us) ** 2 for p in train), c))


def table(rows: list[Parts]) -> tuple[list[str], dict[str, float]]:
    train = [p for p in rows if p.source == TRAIN]
    consts = {name: fit(rule, grid, train) for name, (rule, grid, _) in RULES.items()}
    head = "| source | regime | configs | " + " | ".join(
        f"{n}{f' ({u} {consts[n]:.1f})' if u else ''}" for n, (_, _, u) in RULES.items()) + " |"
    lines = [head, "| --- | --- | ---: |" + " --- |" * len(RULES)]
    for src in SOURCES:
        for rg in REGIMES:
            sel = [p for p in rows if p.source == src and p.regime == rg]
            if not sel:
                continue
            cells = []
            for name, (rule, _, _) in RULES.items():
                e = [predicted(p, rule, consts[name]) / p.measured_us - 1 for p in sel]
                cells.append(f"{100 * statistics.median(abs(x) for x in e):.1f} % ({100 * min(e):+.1f} … {100 * max(e):+.1f} %)")
            lines.append(f"| {src} | {rg} | {len(sel)} | " + " | ".join(cells) + " |")
    return lines, consts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--profile", default="h200-measured")
    ap.add_argument("--rows", action="store_true", help="print every config's parts and per-wave time too")
    args = ap.parse_args(argv)
    rows = parts(load_profile(args.profile))
    lines, _ = table(rows)
    print(f"profile {args.profile}; constants fitted on source '{TRAIN}' ({sum(p.source == TRAIN for p in rows)} configs)")
    print("\n".join(lines))
    if args.rows:
        print("\nsource | regime | config | measured us | body us | spill us | waves | measured per wave less fixed and edge")
        for p in rows:
            per_wave = (p.measured_us - p.edge_us - p.fixed_us) / p.frac_waves
            print(f"{p.source} | {p.regime} | {p.label} | {p.measured_us:.2f} | {p.body_us:.2f} | {p.spill_us:.2f} | "
                  f"{p.waves} ({p.frac_waves:.2f}) | {per_wave:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
