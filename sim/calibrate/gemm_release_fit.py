"""A persistent GEMM beside SM holders that release part-way through it (sim.calibrate.gpu.gemm_release,
issue 20): which rule for the CTAs a resident collective leaves out matches the measurement.

In DDP's backward a bucket's all-reduce is often resident when the next GEMM starts and ends before it.
Four rules for the GEMM's time, each a pure function of its time alone T, its work units U (output
tiles x K splits as the GEMM model tiles it), the SMs S, the SMs held k and the release time r after
the GEMM's start (r = inf: the holder outlasts it). The grid is G = min(U, S) CTAs, one per SM, each
with own = ceil(U / G) units of tau = T / own; F = min(G, S - k) CTAs find a free SM.

- ``share``: the SMs as a fluid: the GEMM runs at (S - k) / S while held (the engine's default);
- ``rounds``: the engine's optional rule (sim.kernelcost.rounds_beside) as the engine applies it: the
  slowdown of a whole hold, as a rate, while held;
- ``static``: each CTA owns its units; the left-out CTAs start when the holder releases (or when a
  resident CTA ends, at T) and then do all theirs: T + min(r, T);
- ``dynamic``: the CTAs take units from one queue (a tile scheduler): F CTAs from the start, the rest
  from r, each unit tau long; the GEMM ends with its last unit (sim.kernelcost.release_beside, the
  engine's rule where a profile declares topology.sms_lost_per_channel).
- ``loss``: the measured form (sim.kernelcost.release_loss): with CTAs left out (F < G) the GEMM loses
  L unit times x min(r / T, 1), L = topology.release_loss_units (fit_release_loss: the median over GEMM
  shapes and SMs held of each one's least-squares slope, unit_loss_slopes; by default the value fitted
  on FILE itself — give --loss-units to test another file's fit on held-out cells).

    python -m sim.calibrate.gemm_release_fit FILE [--profile P] [--loss-units L]

prints every cell (measured and the five rules' slowdowns), each rule's rms log error and the fit of L
with its spread. Pure.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RULES = ("share", "rounds", "static", "dynamic", "loss")
BOOTSTRAP_SEED = 20
BOOTSTRAP_RESAMPLES = 400


@dataclass(frozen=True)
class ReleaseCell:
    m: int
    n: int
    k: int
    spins: int  # SMs held (one-thread spin kernels)
    fraction: float | None  # release after this many times the GEMM's time alone; None: held throughout
    alone_us: float
    release_us: float  # measured release (the last holder's end) after the GEMM's start (inf: held throughout)
    measured: float  # GEMM time beside / alone


def release_cells(doc: dict[str, Any]) -> list[ReleaseCell]:
    """Every cell of a gemm_release.json."""
    out = []
    for rec in doc.get("records") or []:
        if rec.get("bench") != "gemm_release":
            continue
        alone = float(rec["alone_us"])
        for c in rec.get("cells") or []:
            held = c["release_fraction"] == "hold"
            out.append(ReleaseCell(int(rec["m"]), int(rec["n"]), int(rec["k"]), int(c["spin_kernels"]),
                                   None if held else float(c["release_fraction"]), alone,
                                   math.inf if held else float(c.get("release_last_after_start_us",
                                                                     c["release_after_start_us"])),
                                   float(c["gemm_us"]) / alone))
    return out


def _grid(units: float, sms: int) -> tuple[int, int, float]:
    grid = int(min(units, sms))
    own = math.ceil(units / grid - 1e-9)
    return grid, own, units / grid


def slowdown(rule: str, alone_us: float, units: float, sms: int, held: int, release_us: float,
             loss_units: float = 1.5) -> float:
    """The GEMM's time beside `held` SMs released `release_us` after its start, over its time alone
    (`loss_units`: rule ``loss``'s L)."""
    T, r = alone_us, max(0.0, release_us)
    grid, own, _ = _grid(units, sms)
    free = min(grid, sms - held)
    if rule not in RULES:
        raise ValueError(f"unknown rule {rule!r} (expected one of {', '.join(RULES)})")
    if r == 0.0 or held <= 0:
        return 1.0
    if rule == "share":
        return _fluid(T, r, sms / max(1, sms - held)) / T
    if free >= grid:
        return 1.0
    if rule == "rounds":
        from sim.kernelcost import rounds_beside

        return _fluid(T, r, max(1.0, rounds_beside(units, sms, float(sms - held)))) / T
    if rule == "static":
        return (T + min(r, T)) / T
    if rule == "loss":
        from sim.kernelcost import release_loss

        return release_loss(units, sms, float(sms - held), T, r, loss_units) / T
    from sim.kernelcost import release_beside

    return release_beside(units, sms, float(sms - held), T, r) / T


def _fluid(T: float, r: float, factor: float) -> float:
    """End of a job of T alone run `factor` times slower until r, then at full speed."""
    if r * 1.0 / factor >= T:
        return T * factor
    return r + (T - r / factor)


def unit_loss_slopes(cells: list[ReleaseCell], hw: Any) -> dict[tuple[int, int, int, int], float]:
    """Per GEMM shape and SMs held: the least-squares slope of the loss in unit times ((measured - 1) x
    own units per CTA) on min(release / time alone, 1) — how many of its units' time a holder resident
    for that share of the GEMM costs it, whatever the rule."""
    from sim.calibrate.comm_sm_share import gemm_units

    pts: dict[tuple[int, int, int, int], list[tuple[float, float]]] = {}
    for c in cells:
        units = gemm_units(hw, c.m, c.n, c.k)
        own = math.ceil(units / min(units, hw.sm_count) - 1e-9)
        x = min(c.release_us / c.alone_us, 1.0)
        pts.setdefault((c.m, c.n, c.k, c.spins), []).append((x, (c.measured - 1.0) * own))
    return {key: sum(x * y for x, y in v) / sum(x * x for x, _ in v) for key, v in pts.items()
            if sum(x * x for x, _ in v) > 0}


@dataclass(frozen=True)
class LossFit:
    value: float  # unit times lost by a GEMM whose holder stays throughout
    spread: tuple[float, float]  # 5th-95th percentile of the bootstrap (cells resampled per shape and SMs held)
    n: int  # cells
    slopes: dict[tuple[int, int, int, int], float]  # per GEMM shape (m, n, k) and SMs held


def fit_release_loss(cells: list[ReleaseCell], hw: Any) -> LossFit | None:
    """topology.release_loss_units from gemm_release cells: the median over GEMM shapes and SMs held of
    each one's least-squares loss slope (unit_loss_slopes) — a median, so that one shape's doubtful
    reference alone (the one-round 2048x2048x4096: slower than alone at early releases by 0.69-0.82x)
    moves it little; spread by bootstrap (the cells of each shape and SMs held resampled, seeded)."""
    import random

    slopes = unit_loss_slopes(cells, hw)
    if not slopes:
        return None
    groups: dict[tuple[int, int, int, int], list[ReleaseCell]] = {}
    for c in cells:
        groups.setdefault((c.m, c.n, c.k, c.spins), []).append(c)
    rng = random.Random(BOOTSTRAP_SEED)
    boot = []
    for _ in range(BOOTSTRAP_RESAMPLES):
        sample = [g[rng.randrange(len(g))] for g in groups.values() for _ in g]
        b = unit_loss_slopes(sample, hw)
        if b:
            boot.append(statistics.median(b.values()))
    boot.sort()
    lo, hi = boot[int(0.05 * (len(boot) - 1))], boot[int(math.ceil(0.95 * (len(boot) - 1)))]
    value = statistics.median(slopes.values())
    return LossFit(value, (min(lo, value), max(hi, value)), len(cells), slopes)


def release_loss_entry(doc: dict[str, Any], raw_ref: str, hw: Any) -> dict[str, Any] | None:
    """The profile entry `topology.release_loss_units` fitted on a gemm_release.json (fit_release_loss),
    with its provenance, spread and cell count; None where it has no cells to fit."""
    fit = fit_release_loss(release_cells(doc), hw)
    if fit is None:
        return None
    meta = doc.get("meta") or {}
    on = f"{meta.get('gpu_name') or 'NVIDIA H200'} (one GPU, torch {meta.get('torch', '?')})"
    return {"value": round(fit.value, 2), "source": "measured", "measured_on": on,
            "date": str(meta.get("date_utc", ""))[:10], "raw": raw_ref,
            "fit": (f"cuBLAS bf16 GEMMs started beside 8 or 24 one-thread spin kernels that end part-way: per GEMM "
                    f"shape and SMs held, the least-squares slope of the loss in unit times (time beside / alone - 1, "
                    f"x units per CTA) on min(release / time alone, 1); the median of the {len(fit.slopes)} slopes "
                    f"(sim.calibrate.gemm_release_fit.fit_release_loss); spread: 90 % bootstrap over the cells"),
            "spread": [round(fit.spread[0], 2), round(fit.spread[1], 2)], "n": fit.n}


def rms_log(errors: list[float]) -> float:
    return math.sqrt(statistics.fmean(e * e for e in errors)) if errors else 0.0


def report(cells: list[ReleaseCell], hw: Any, loss_units: float = 1.5) -> list[str]:
    from sim.calibrate.comm_sm_share import gemm_units

    lines = [f"{'GEMM (m x n x k)':20s} {'units':>6s} {'held':>4s} {'release':>8s} {'alone us':>9s} {'measured':>8s} "
             + " ".join(f"{r:>8s}" for r in RULES)]
    errs: dict[str, list[float]] = {r: [] for r in RULES}
    for c in cells:
        units = gemm_units(hw, c.m, c.n, c.k)
        preds = {r: slowdown(r, c.alone_us, units, hw.sm_count, c.spins, c.release_us, loss_units) for r in RULES}
        for r in RULES:
            errs[r].append(math.log(preds[r]) - math.log(c.measured))
        rel = "hold" if c.fraction is None else f"{c.release_us / c.alone_us:.2f}T"
        lines.append(f"{c.m}x{c.n}x{c.k:<8d} {units:6.0f} {c.spins:4d} {rel:>8s} {c.alone_us:9.1f} {c.measured:8.3f} "
                     + " ".join(f"{preds[r]:8.3f}" for r in RULES))
    lines.append("rms log error: " + ", ".join(f"{r} {rms_log(errs[r]):.3f}" for r in RULES))
    released = [i for i, c in enumerate(cells) if c.fraction is not None]
    lines.append("released cells only: " + ", ".join(
        f"{r} {rms_log([errs[r][i] for i in released]):.3f}" for r in RULES))
    multi = [i for i, c in enumerate(cells)
             if math.ceil(gemm_units(hw, c.m, c.n, c.k) / min(gemm_units(hw, c.m, c.n, c.k), hw.sm_count) - 1e-9) > 1]
    if multi and len(multi) < len(cells):
        lines.append("shapes of more than one unit per CTA only: " + ", ".join(
            f"{r} {rms_log([errs[r][i] for i in multi]):.3f}" for r in RULES))
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("raw", type=Path, help="gemm_release.json of python3 -m sim.calibrate.gpu.gemm_release")
    ap.add_argument("--profile", default="h200-measured", help="profile whose GEMM tiling and SM count are used")
    ap.add_argument("--loss-units", type=float, default=None,
                    help="rule loss's L (default: fitted on FILE itself)")
    ns = ap.parse_args(argv)
    from sim.hardware import load_profile

    try:
        cells = release_cells(json.loads(ns.raw.read_text()))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"error: {ns.raw}: not a gemm_release.json ({exc!r})", file=sys.stderr)
        return 2
    if not cells:
        print(f"error: {ns.raw}: no gemm_release cells", file=sys.stderr)
        return 2
    if ns.loss_units is not None and not (ns.loss_units > 0 and math.isfinite(ns.loss_units)):
        print(f"error: --loss-units: {ns.loss_units}: expected a positive number", file=sys.stderr)
        return 2
    hw = load_profile(ns.profile)
    fit = fit_release_loss(cells, hw)
    loss = ns.loss_units if ns.loss_units is not None else (fit.value if fit is not None else 1.5)
    for line in report(cells, hw, loss):
        print(line)
    for (m, n, k, held), slope in unit_loss_slopes(cells, hw).items():
        print(f"{m}x{n}x{k} beside {held}: loss {slope:.2f} unit times x min(release / alone, 1)")
    if fit is not None:
        print(f"release_loss_units fitted on this file: {fit.value:.2f} (median of {len(fit.slopes)} slopes; "
              f"90 % bootstrap {fit.spread[0]:.2f}-{fit.spread[1]:.2f}; {fit.n} cells); rule loss above uses {loss:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
