"""Analysis (issue 20, not a model change): the contention table and DDP exposed time of `h200-nvl2`
replayed with five rules for a GEMM beside a resident all-reduce, to see how the all-reduce's side
follows the GEMM's.

    python scripts/comm_contention_sides.py [--out FILE.md]

Rules (the all-reduce side is the engine's in all but one: a collective's CTAs wait for the
machine-filling kernels running when it becomes ready — HoldingGPU.admission — and its transfer
shares HBM by SMs):
- fluid: the shipped profile (SMs shared as a fluid: a GEMM beside c channels runs at 1 - c/SMs);
- fluid, no wait: the same without the admission wait (the collective's CTAs start at once), to
  show what the all-reduce's slowdown is made of;
- rounds@fit: the rule `topology.sms_lost_per_channel` turns on, that value fitted on the wave-6
  sm_share cells (sim.calibrate.comm_sm_share.fit_lost): a GEMM that starts beside the collective is
  priced by `release_beside` (the rounds of `rounds_beside` while it holds, re-priced when it
  releases), one already running when it arrives runs at `rounds_beside`'s rate;
- rounds@1: the same rule at one SM per channel;
- measured: the GEMM's slowdown beside c channels read from the sm_share cells themselves
  (median over the GEMM shapes of the same work units, linear in c between the measured channel
  counts). Only GEMMs with the work units of a measured shape have a value; others fall back to
  rounds@1. The contention cells' GEMMs are sm_share shapes, so under this rule their GEMM side is
  calibrated by shape: it shows what a right GEMM side does to the all-reduce side, it is not a
  held-out check of a rule.
- release@1+start: rounds@1 (a GEMM that starts beside the collective is priced by
  sim.kernelcost.release_beside: its left-out CTAs start when the collective releases, the units left
  then cost what remains of the last round) plus `topology.collective_start_us` (the collective's CTAs
  start after a kernel of another stream released with it and already queued; the value is the
  median start gap of the all-reduces that won that race in the DDP profiles, race_start_us).
- loss@L (comm7): `topology.release_loss_units` = L, fitted by sim.calibrate.gemm_release_fit on the
  single-GPU calibration data (calibration/h200/raw/gemm_release_gated; machine P's gemm_release held
  out): a GEMM that starts beside the collective with CTAs left out loses L unit times x min(how long
  the collective stays / its time alone, 1) (sim.kernelcost.release_loss); no SMs-lost rule otherwise
  (a GEMM running when the collective arrives shares the SMs as a fluid);
- loss@L+start: the same plus `topology.collective_start_us` (as release@1+start);
- loss@L+lost1(+start): the same on top of rounds@1 (rounds for a GEMM running when the collective
  arrives; a collective that waited takes the SMs first).

    python scripts/comm_contention_sides.py [--out FILE.md] [--variants NAME,NAME,...]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sim.calibrate.comm_sm_share import fit_lost, gemm_units, share_cells  # noqa: E402
from sim.hardware import load_profile, resolve_profile  # noqa: E402
from sim.validate import comm as vc  # noqa: E402

COMM = ROOT / "calibration" / "h200x2" / "comm"
SM_SHARE = COMM / "sm_share" / "comm.json"
RELEASE = ROOT / "calibration" / "h200" / "raw" / "gemm_release_gated" / "gemm_release.json"
PROFILE = "h200-nvl2"


def overlay(tmp: Path, lost: float | None, start_us: float | None = None, loss_units: float | None = None) -> str:
    """A profile file: h200-nvl2 with, where given, `topology.sms_lost_per_channel` = lost,
    `topology.collective_start_us` = start_us and `topology.release_loss_units` = loss_units (analysis only)."""
    tag = f"{lost or 0:g}" + ("" if start_us is None else f"_start{start_us:.2f}") + (
        "" if loss_units is None else f"_loss{loss_units:.2f}")
    path = tmp / f"nvl2_lost_{tag}.yaml"
    keys = [f"  {key}: {{value: {value:.3f}, source: estimate, note: analysis}}\n" for key, value in (
        ("sms_lost_per_channel", lost), ("collective_start_us", start_us), ("release_loss_units", loss_units))
        if value is not None]
    path.write_text(f"base: {resolve_profile(PROFILE)}\nname: nvl2-lost-{tag}\ntopology:\n" + "".join(keys))
    return str(path)


def fitted_loss_units() -> float:
    """topology.release_loss_units as sim.calibrate.gemm_release_fit fits it on the calibration data."""
    from sim.calibrate.gemm_release_fit import fit_release_loss, release_cells

    cells = release_cells(json.loads(RELEASE.read_text()))
    fit = fit_release_loss(cells, load_profile("h200-measured"))
    assert fit is not None
    return round(fit.value, 2)


def race_start_us() -> float:
    """A collective's CTA start after its input is ready, where nothing beat it: the median gap of the
    bucket all-reduces that started before the compute stream's queued next kernel in the committed
    DDP profiles (sim.calibrate.ddp_timeline.collective_races; the validation runs w3, H and ranks)."""
    from sim.calibrate.ddp_timeline import collective_races, profile_timelines

    gaps = []
    for path in (COMM / "w3" / "comm.json", ROOT / "validation" / "h200x2" / "machine_H" / "comm.json",
                 COMM / "ranks" / "comm.json"):
        for rec in json.loads(path.read_text())["records"]:
            for tl in profile_timelines(rec):
                gaps += [r.allreduce_gap_us for r in collective_races(tl) if r.contested and r.allreduce_first]
    return statistics.median(gaps)


def measured_rule(cells: list, hw: object) -> Callable[[float, int, float], float]:
    """rounds_beside's signature, answered from the measured all-reduce cells by work units and SMs lost."""
    from sim.kernelcost import rounds_beside

    by_units: dict[float, dict[int, list[float]]] = {}
    for c in cells:
        if c.occupier == "all_reduce" and c.contained:
            by_units.setdefault(gemm_units(hw, c.m, c.n, c.k), {}).setdefault(c.ctas, []).append(c.measured)
    table = {u: sorted((ch, statistics.median(v)) for ch, v in d.items()) for u, d in by_units.items()}

    def rule(units: float, sm_count: int, free_sms: float) -> float:
        pts = table.get(units)
        if pts is None:
            return rounds_beside(units, sm_count, free_sms)
        lost = sm_count - free_sms
        if lost <= pts[0][0]:
            return pts[0][1]
        for (a, ya), (b, yb) in zip(pts, pts[1:], strict=False):
            if lost <= b:
                return ya + (yb - ya) * (lost - a) / (b - a)
        return pts[-1][1]

    return rule


NO_WAIT = "no admission wait"


@contextmanager
def gemm_rule(rule: Callable[[float, int, float], float] | str | None) -> Iterator[None]:
    if rule is None:
        yield
    elif rule == NO_WAIT:  # the all-reduce's CTAs start at once beside a running GEMM (SMs shared as a fluid)
        with mock.patch("sim.engine.HoldingGPU.admission", lambda self: None):
            yield
    else:  # a GEMM that starts beside the collective, or runs when it arrives: the rule's slowdown throughout
        def held(units: float, sm_count: int, free_sms: float, alone_s: float, _released_after_s: float) -> float:
            return alone_s * max(1.0, rule(units, sm_count, free_sms))

        with mock.patch("sim.engine.rounds_beside", rule), mock.patch("sim.engine.release_beside", held):
            yield


def run_variant(profile: str, rule: Callable[[float, int, float], float] | str | None) -> tuple[list, list]:
    machines = vc.heldout_machine_runs(ROOT)
    with gemm_rule(rule):
        cont = vc.contention_rows(COMM, profile) + vc.contention_rows(COMM, profile, runs=machines)
        ddp = vc.ddp_rows(COMM, profile) + vc.ddp_rows(COMM, profile, runs=machines)
    return cont, ddp


def ddp_groups(rows: list) -> dict[str, tuple[float, float, int]]:
    out = {}
    for split in sorted({r.split for r in rows}):
        e = [abs(r.predicted_us / r.measured_us - 1) for r in rows if r.split == split]
        out[f"comm_ddp/exposed/{split}"] = (statistics.median(e), max(e), len(e))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=None, help="also write the tables to this Markdown file")
    ap.add_argument("--variants", default=None, help="comma-separated variant names to replay (default: all)")
    ns = ap.parse_args(argv)
    hw = load_profile(PROFILE)
    cells = share_cells(json.loads(SM_SHARE.read_text()), hw.fabric.channels)
    fit = fit_lost(hw, cells)
    assert fit is not None
    with tempfile.TemporaryDirectory() as tmp:
        variants: dict[str, tuple[str, Callable[[float, int, float], float] | str | None]] = {
            "fluid": (PROFILE, None),
            "fluid, no wait": (PROFILE, NO_WAIT),
            f"rounds@{fit[0]:g}": (overlay(Path(tmp), fit[0]), None),
            "rounds@1": (overlay(Path(tmp), 1.0), None),
            "measured": (overlay(Path(tmp), 1.0), measured_rule(cells, hw)),
            "release@1+start": (overlay(Path(tmp), 1.0, race_start_us()), None),
        }
        loss = fitted_loss_units()
        variants.update({
            f"loss@{loss:g}": (overlay(Path(tmp), None, None, loss), None),
            f"loss@{loss:g}+start": (overlay(Path(tmp), None, race_start_us(), loss), None),
            f"loss@{loss:g}+lost1": (overlay(Path(tmp), 1.0, None, loss), None),
            f"loss@{loss:g}+lost1+start": (overlay(Path(tmp), 1.0, race_start_us(), loss), None),
        })
        if ns.variants:
            wanted = ["fluid"] + [v for v in ns.variants.split(",") if v != "fluid"]
            unknown = [v for v in wanted if v not in variants]
            if unknown:
                print(f"error: --variants: {', '.join(unknown)}: expected names among {', '.join(variants)}",
                      file=sys.stderr)
                return 2
            variants = {v: variants[v] for v in wanted}
        results = {name: run_variant(p, rule) for name, (p, rule) in variants.items()}
    names = list(results)
    lines = ["| cell (device-bound) | split | stream | measured | " + " | ".join(names) + " |",
             "|---|---|---|---|" + "---|" * len(names)]
    base = results[names[0]][0]
    for i, row in enumerate(base):
        if row.regime != "device":
            continue
        preds = " | ".join(f"{results[n][0][i].predicted_pct:+.1f}" for n in names)
        lines.append(f"| {row.label} | {row.split} | {row.stream} | {row.measured_pct:+.1f} | {preds} |")
    lines += ["", "| group | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    groups = {n: vc.contention_quantities(results[n][0]) for n in names}
    for g in sorted(groups[names[0]]):
        lines.append(f"| {g} (median / max pp) | " + " | ".join(
            f"{groups[n][g]['median_abs_pp']:.2f} / {groups[n][g]['max_abs_pp']:.1f}" for n in names) + " |")
    ddp = {n: ddp_groups(results[n][1]) for n in names}
    for g in sorted(ddp[names[0]]):
        lines.append(f"| {g} (median / max) | " + " | ".join(
            f"{ddp[n][g][0]:.3f} / {ddp[n][g][1]:.3f}" for n in names) + " |")
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if ns.out is not None:
        ns.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
