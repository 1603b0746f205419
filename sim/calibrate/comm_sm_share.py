"""A GEMM that starts beside a resident occupier (stage sm_share of the two-GPU harness, issue 20):
the fit of the profile's `topology.sms_lost_per_channel` and the table of measured vs modeled
slowdowns.

The harness starts bf16 GEMMs of calibration-split shapes while an occupier already holds SMs (as a
DDP backward GEMM starts beside a bucket's all-reduce): all-reduces on groups pinned to c NCCL
channels (c CTAs) and on the default group, k one-thread spin kernels (SMs held, no memory traffic),
a device copy (HBM traffic). The model (sim.costmodel.collective.rounds_beside): the GEMM's persistent
grid (one CTA per SM) has its CTAs that find no free SM left out, and their work units (output tiles x
K splits, sim.costmodel.gemm.gemm_terms) done by the resident CTAs in extra rounds, with
sm_count - lost x c SMs free; the fit is the `lost` (SMs per channel) that brings the
modeled all-reduce cells closest to the measured ones (least squares in log slowdown, over the cells
whose GEMM window lay inside the occupier's on every rank). The spin cells give the same quantity per
spin kernel (a CTA that moves no memory), the copy cell what HBM traffic alone costs: reported, not
fitted. Pure functions of the recorded data and a profile.

    python -m sim.calibrate.comm_sm_share calibration/h200x2/comm/sm_share/comm.json [--profile P]
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

# candidate SMs lost per occupier CTA: 0.25 .. 4 in steps of 0.05 (a grid: the loss is a step function)
_CANDIDATES = tuple(round(0.25 + 0.05 * i, 2) for i in range(76))


@dataclass(frozen=True)
class ShareCell:
    """One GEMM shape x one occupier of a sm_share record."""

    m: int
    n: int
    k: int
    occupier: str  # all_reduce | spin | copy
    ctas: int  # the occupier's CTAs resident beside the GEMM (channels; spin kernels; 0 for the copy)
    measured: float  # GEMM time per call beside / alone, median over the ranks
    contained: bool  # the GEMM's window lay inside the occupier's on every rank and repetition
    alone_us: float


def _default_channels(doc: dict[str, Any]) -> int | None:
    """CTAs of the default group's all-reduce kernel (its grid, from the profiler), rank 0."""
    for rec in doc.get("records") or []:
        if rec.get("bench") == "sm_share_meta":
            meta = (rec.get("per_rank") or [{}])[0]
            for ev in meta.get("allreduce_kernel_default") or []:
                grid = ev.get("grid")
                if "nccl" in str(ev.get("name", "")).lower() and isinstance(grid, list) and grid:
                    return int(math.prod(int(g) for g in grid))
    return None


def share_cells(doc: dict[str, Any], default_channels: int) -> list[ShareCell]:
    """Every GEMM x occupier cell of a comm.json's sm_share records (world size 2)."""
    ch_default = _default_channels(doc) or default_channels
    out = []
    for rec in doc.get("records") or []:
        if rec.get("bench") != "sm_share" or "skipped" in rec or int(rec.get("world_size", 0)) != 2:
            continue
        shape = rec["load_shape"]
        m, n, k = int(shape["m"]), int(shape["n"]), int(shape["k"])
        alone = statistics.median(float(p["per_call_us"]) for p in rec["cells"]["alone"]["per_rank"])
        for cell in rec["cells"].values():
            occ = cell.get("occupier")
            if occ is None:
                continue
            if occ == "all_reduce":
                ctas = int(cell["ctas"]) if cell.get("ctas") is not None else ch_default
            elif occ == "spin":
                ctas = int(cell["spin_kernels"])
            else:
                ctas = 0
            slow = statistics.median(float(x) for x in cell["slowdown_ranks"])
            contained = all(bool(p.get("contained")) for p in cell["per_rank"])
            out.append(ShareCell(m, n, k, str(occ), ctas, slow, contained, alone))
    return out


def gemm_units(hw: Any, m: int, n: int, k: int) -> float:
    """A bf16 GEMM's work units as the GEMM model tiles it (output tiles x K splits)."""
    from sim.costmodel.gemm import gemm_terms

    t = gemm_terms(hw, m, n, k, 1, "bf16")
    return float(t["tiles"] * t["split_k"])


def modeled(hw: Any, cell: ShareCell, lost_per_cta: float) -> float:
    """The model's slowdown of the cell's GEMM beside `ctas` occupier CTAs that take `lost_per_cta` SMs each."""
    from sim.costmodel.collective import rounds_beside

    free = hw.sm_count - lost_per_cta * cell.ctas
    return max(1.0, rounds_beside(gemm_units(hw, cell.m, cell.n, cell.k), hw.sm_count, free))


def fit_lost(hw: Any, cells: list[ShareCell], occupier: str = "all_reduce") -> tuple[float, int, float] | None:
    """(SMs lost per CTA, cells used, rms log error) minimizing the squared log error over the
    contained cells of `occupier`; None without such cells. Ties go to the smaller loss."""
    use = [c for c in cells if c.occupier == occupier and c.contained and c.ctas > 0]
    if not use:
        return None
    best: tuple[float, float] | None = None
    for cand in _CANDIDATES:
        sse = sum((math.log(modeled(hw, c, cand)) - math.log(c.measured)) ** 2 for c in use)
        if best is None or sse < best[1] - 1e-12:
            best = (cand, sse)
    assert best is not None
    return best[0], len(use), math.sqrt(best[1] / len(use))


def report_lines(hw: Any, cells: list[ShareCell], lost: float) -> list[str]:
    lines = [f"{'GEMM (m x n x k)':22s} {'units':>6s} {'occupier':>10s} {'CTAs':>5s} {'alone us':>9s} "
             f"{'measured':>9s} {'model':>7s}  inside"]
    for c in cells:
        lines.append(f"{c.m}x{c.n}x{c.k:<10d} {gemm_units(hw, c.m, c.n, c.k):6.0f} {c.occupier:>10s} {c.ctas:5d} "
                     f"{c.alone_us:9.1f} {c.measured:9.3f} {modeled(hw, c, lost) if c.ctas else 1.0:7.3f}  "
                     f"{'yes' if c.contained else 'NO'}")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("raw", type=Path, help="comm.json with sm_share records (python3 -m sim.calibrate.gpu.comm)")
    ap.add_argument("--profile", default="h200-nvl2", help="profile whose GEMM tiling and SM count are used")
    ns = ap.parse_args(argv)
    from sim.hardware import load_profile

    try:
        doc = json.loads(ns.raw.read_text())
    except (OSError, ValueError) as exc:
        print(f"error: {ns.raw}: cannot read a comm.json ({exc})", file=sys.stderr)
        return 2
    hw = load_profile(ns.profile)
    cells = share_cells(doc, hw.fabric.channels)
    if not cells:
        print(f"error: {ns.raw}: records: no sm_share cells at world size 2", file=sys.stderr)
        return 2
    fit = fit_lost(hw, cells)
    spin = fit_lost(hw, cells, "spin")
    lost = fit[0] if fit else 1.0
    print("\n".join(report_lines(hw, cells, lost)))
    print(f"SMs lost per NCCL channel (all-reduce cells): {fit}; per spin kernel: {spin}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
