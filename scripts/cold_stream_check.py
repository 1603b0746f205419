"""A cold GEMM's weight stream at its own rate (gemm.cold_stream_gbps, fitted jointly with gemm.cold_ramp_us; OFF):
what it does to fresh calibrations' held-out GEMMs and fresh limits (issue 16, calib11).

    python scripts/cold_stream_check.py --repro DOC --profiles DIR [--dirty] [NAME ...]

DOC: a `python -m sim.calibrate.repro --json` document (its calibrations' raw folders and validate quantities);
DIR: the profiles that run kept (--profiles-out), NAME.yaml each. For each calibration (default: all in DOC):
1. the cold fits as `kernelsim calibrate` runs them (sim.calibrate.fit.fit_cold_gemms_last: last, on the fitted
   profile with its own GEMM correction table; the cold numbers are read by nothing fitted after them, so this is
   the calibration's own fit; until 2026-12-02 the ramp alone and the write-back ran before the table, on the base
   profile's): first the ramp alone, which must give the profile's own gemm.cold_ramp_us back (checked), then the
   ramp and the stream rate together; with --dirty, memory.l2_dirty_writeback_gbps after each (as the fit does when
   the base profile carries it);
2. validate's quantities of the tables holding `l2: cold` kernels (scripts/fresh_w3_drivers.cold_tables: the
   kernel table and the held-out kernel tables) for each variant, and the fresh limits each exceeds (every other
   group keeps what DOC's validate run measured; the own-ramp recomputation must give DOC's back: checked).
Prints a markdown table. CPU only; about a minute per calibration on a loaded 2-core VM.

    python scripts/cold_stream_check.py --variants [--profile h200-measured] [--raw calibration/h200/raw]

The shipped profile (fitted from RAW over h200-sxm) with the GEMM fits of `kernelsim calibrate`'s second stage run
again under each combination of three switches a base profile turns on by carrying the key: the joint cold stream
(gemm.cold_stream_gbps), gpu11's small-M tile rule (gemm.small_m_row_step / small_m_tile_n, fit_small_m_tiles) and the
dirty flush's write-back (memory.l2_dirty_writeback_gbps): the fits these reach are run again as calibrate_from_raw
runs them (stage2_gemm); every other number stays the profile's. Checked: with no switch this gives the profile's own
cold ramp and correction table back (since 2026-12-02, when h200-sxm carries the tiles and the write-back rate:
the base's own switches give the profile's numbers back). Prints validate's quantities of the held-out kernel tables
(heldout_tables) for the groups SHOWN and their tripwires; the kernel table and steps are not recomputed (the tile rule also moves
warm small-M GEMMs in steps: gpu11's full validate figures, docs/gemm_small_m.md).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from fresh_w3_drivers import cold_tables  # noqa: E402

from sim.calibrate.cases import cases_from_raw  # noqa: E402
from sim.calibrate.fit import _grid_fit, fit_cold_stream, fit_dirty_writeback  # noqa: E402
from sim.calibrate.raw import held_out, load_raw  # noqa: E402
from sim.hardware import Hardware, load_profile, resolve_profile  # noqa: E402


def _cache_the_kernel_split(path: Path | None) -> None:
    """validate's kernel table splits the shipped raw folder's records into calibrated and unseen by what a
    calibration of that folder over h200-sxm used (sim.validate.core.kernel_rows: one calibrate_from_raw, minutes,
    the same for every profile priced): done once per run here, or read from `path` (a pickle this writes)."""
    import pickle

    import sim.validate.core as core

    real = core.calibrate_from_raw
    memo: dict[tuple[str, str], Any] = {}

    def cached(raw_dir: Path, base: Path, out: Path, name: str, **kw: Any) -> Any:
        key = (str(Path(raw_dir).resolve()), str(Path(base).resolve()))
        if key not in memo:
            if path is not None and path.is_file():
                memo.update(pickle.loads(path.read_bytes()))
            if key not in memo:
                memo[key] = real(raw_dir, base, out, name, **kw)
                if path is not None:
                    path.write_bytes(pickle.dumps(memo))
        return memo[key]

    core.calibrate_from_raw = cached  # type: ignore[assignment]


SHOWN = (("heldout_w3/all/unseen", "median_abs"), ("heldout_w3/gemm/unseen", "median_abs"),
         ("heldout_w3/gemm/unseen", "p90_abs"), ("heldout_w4/gemm/unseen", "median_abs"),
         ("heldout_w4/gemm/unseen", "p90_abs"), ("heldout/gemm/unseen", "median_abs"),
         ("heldout/gemm/unseen", "p90_abs"))
PLACEHOLDER_WRITEBACK_GBPS = 8000.0  # where the profile has none: any value turns the fit on (its grid is fixed)


def cold_fits(raw_dir: Path, hw: Hardware, base: Hardware, dirty: bool) -> dict[str, Any]:
    """The profile's cold numbers refitted: {'alone': (ramp us, writeback GB/s | None),
    'joint': (ramp us, rate GB/s, spreads, writeback GB/s | None), 'hw_alone', 'hw_joint'}."""
    raw = load_raw(raw_dir)
    cases = [c for c in cases_from_raw({"l2_cold": list(raw.groups["l2_cold"].records)})
             if not held_out(c.record) and c.family == "gemm_cold"]
    stage = hw  # the profile's own correction table: calibrate fits the cold numbers last (fit_cold_gemms_last)
    if dirty and stage.l2_dirty_writeback_bps is None:
        stage = dataclasses.replace(stage, l2_dirty_writeback_bps=PLACEHOLDER_WRITEBACK_GBPS * 1e9)
    alone = _grid_fit(cases, [{"v": 0.05 * i} for i in range(1, 161)],
                      lambda c: dataclasses.replace(stage, gemm_cold_ramp_s=c["v"] * 1e-6))
    ramp = round(alone.best["v"], 2)
    hw_alone = dataclasses.replace(hw, gemm_cold_ramp_s=ramp * 1e-6)
    wb_alone = None
    if dirty:
        f = fit_dirty_writeback(raw, dataclasses.replace(stage, gemm_cold_ramp_s=alone.best["v"] * 1e-6))
        wb_alone = float(f[0].value) if f else None
        hw_alone = dataclasses.replace(hw_alone, l2_dirty_writeback_bps=wb_alone * 1e9 if wb_alone else None)
    # the joint fit runs last, on the profile with its own correction table (sim.calibrate.fit.fit_cold_gemms_last)
    own = dataclasses.replace(hw, gemm_cold_stream_bps=hw.hbm_sustained_bps,
                              l2_dirty_writeback_bps=stage.l2_dirty_writeback_bps)
    stage_joint, fits = fit_cold_stream(cases, own, raw.file_of("l2_cold"))
    j = {f.key: f for f in fits}
    hw_joint = dataclasses.replace(hw, gemm_cold_ramp_s=float(j["cold_ramp_us"].value) * 1e-6,
                                   gemm_cold_stream_bps=float(j["cold_stream_gbps"].value) * 1e9)
    wb_joint = None
    if dirty:
        f = fit_dirty_writeback(raw, stage_joint)
        wb_joint = float(f[0].value) if f else None
        hw_joint = dataclasses.replace(hw_joint, l2_dirty_writeback_bps=wb_joint * 1e9 if wb_joint else None)
    return {"n": len(cases), "alone": (ramp, wb_alone),
            "joint": (float(j["cold_ramp_us"].value), float(j["cold_stream_gbps"].value),
                      j["cold_ramp_us"].spread, j["cold_stream_gbps"].spread, wb_joint),
            "hw_alone": hw_alone, "hw_joint": hw_joint}


def _field_of(path: str) -> tuple[str, float] | None:
    """The Hardware field a profile number (`section.key`) loads into, and its unit scale."""
    for f in dataclasses.fields(Hardware):
        if f.metadata.get("profile") == path:
            return f.name, float(f.metadata["scale"])
    return None


def stage2_gemm(raw_dir: Path, hw: Hardware, base: Hardware, stream: bool, tiles: bool,
                dirty: bool) -> tuple[Hardware, dict[str, float]]:
    """`hw` (a profile fitted from raw_dir) with calibrate's GEMM fits that the switches reach re-run: the small-M
    tiles (first stage, after fit_gemm), the correction table (fit_gemm_correction), then last on it the cold ramp
    alone or, with the stream on, the joint cold fit, and the write-back (fit_cold_gemms_last; since 2026-12-02 the
    ramp alone and the write-back too, before that fit_model_based's, on the base's table). The misaligned factors do not read the tile rule (misaligned shapes
    skip the Hopper tiles) and no other second-stage fit prices a GEMM. Returns the new hardware and {profile path:
    value} of the numbers fitted."""
    from sim.calibrate.fit import (
        fit_cold_gemms_last,
        fit_gemm_correction,
        fit_small_m_tiles,
        model_us_for,
    )

    raw = load_raw(raw_dir)
    stage = dataclasses.replace(hw, gemm_correction=base.gemm_correction, gemm_small_m_row_step=None,
                                gemm_small_m_tile_n=None, gemm_cold_stream_bps=None, l2_dirty_writeback_bps=None)
    values: dict[str, float] = {}
    if tiles:
        for f in fit_small_m_tiles(raw, int(hw.gemm_tile_m)):
            values[f"{f.section}.{f.key}"] = float(f.value)  # type: ignore[arg-type]
        stage = _apply(stage, values)
    if dirty:
        stage = dataclasses.replace(stage, l2_dirty_writeback_bps=PLACEHOLDER_WRITEBACK_GBPS * 1e9)
    table = fit_gemm_correction(raw, model_us_for(stage))
    out = dataclasses.replace(stage, gemm_correction=tuple((p["m"], p["n"], p["k"], p["dtype"], p["ratio"]) for p in table))
    if stream:
        out = dataclasses.replace(out, gemm_cold_stream_bps=out.hbm_sustained_bps)
    last = {f"{f.section}.{f.key}": float(f.value) for f in fit_cold_gemms_last(raw, out)}  # type: ignore[arg-type]
    values.update(last)
    out = _apply(out, last)
    return out, values


def _apply(h: Hardware, vals: dict[str, float]) -> Hardware:
    repl = {}
    for path, v in vals.items():
        fs = _field_of(path)
        if fs is not None:
            repl[fs[0]] = v * fs[1]
    return dataclasses.replace(h, **repl)


def variants(profile: str, raw_dir: Path, base_name: str) -> int:
    from sim.validate.core import load_thresholds

    hw = load_profile(str(resolve_profile(profile, ROOT)))
    base = load_profile(str(resolve_profile(base_name, ROOT)))
    gates = load_thresholds(ROOT / "validation" / "thresholds.yaml")["gates"]
    # the switches the base carries (h200-sxm since 2026-12-02: the small-M tiles and the write-back rate on, the
    # stream off) give the profile's own numbers back (the emulation is calibrate's own second stage)
    own = (base.gemm_cold_stream_bps is not None, base.gemm_small_m_row_step is not None,
           base.l2_dirty_writeback_bps is not None)
    off, vals = stage2_gemm(raw_dir, hw, base, *own)
    assert off.gemm_correction == hw.gemm_correction, "correction table not reproduced"
    for path, v in vals.items():
        name, scale = _field_of(path) or (None, 1.0)
        assert name is not None and abs(getattr(hw, name) - v * scale) <= 1e-9 * abs(v * scale), (path, v)
    head = ["stream / tiles / write-back", "cold_ramp_us", "cold_stream_gbps", "l2_dirty_writeback_gbps"]
    head += [f"{g} {k.split('_')[0]} (tripwire)" for g, k in SHOWN]
    print(f"{profile} from {raw_dir}: stage-2 GEMM fits re-run; the base's own switches (stream / tiles / write-back "
          f"{'/'.join('on' if x else 'off' for x in own)}) give its own numbers back (checked)\n")
    print("| " + " | ".join(head) + " |\n|" + " --- |" * len(head))
    for stream in (False, True):
        for tiles in (False, True):
            for dirty in (False, True):
                h, v = stage2_gemm(raw_dir, hw, base, stream, tiles, dirty)
                q = heldout_tables(h)
                row = ["/".join("on" if x else "off" for x in (stream, tiles, dirty)),
                       f"{v.get('gemm.cold_ramp_us', float('nan')):g}", f"{v.get('gemm.cold_stream_gbps', 0):.0f}" if stream else "—",
                       f"{v.get('memory.l2_dirty_writeback_gbps', 0):.0f}" if dirty else "—"]
                for g, k in SHOWN:
                    trip = ((gates.get(g) or {}).get("tripwire") or {}).get(k)
                    val = q.get(g, {}).get(k)
                    mark = " **over**" if trip is not None and val is not None and val > trip else ""
                    row.append(f"{val:.3f} ({trip}){mark}" if val is not None else "—")
                print("| " + " | ".join(row) + " |", flush=True)
    return 0


def heldout_tables(hw: Hardware) -> dict[str, dict[str, float]]:
    """validate's quantities of the held-out kernel tables (heldout: machines A, C, F; heldout_w3; heldout_w4), the
    rows sim.validate.wave2.wave2_rows makes for them: seconds, no kernel table (which needs a calibration)."""
    from sim.validate.core import measured_quantities, summarize
    from sim.validate.wave2 import (
        WAVE4_KERNELS,
        heldout_kernel_rows,
        wave3_kernel_rows,
        wave4_kernel_rows,
    )

    rows = heldout_kernel_rows(hw, ROOT / "validation" / "h200" / "heldout_kernels", ROOT / "calibration" / "h200" / "raw")
    rows += wave3_kernel_rows(hw, ROOT / "validation" / "h200" / "wave3" / "gpu" / "wave3_gpu.json")
    rows += wave4_kernel_rows(hw, ROOT / WAVE4_KERNELS)
    return {g: {k: round(float(x), 6) for k, x in q.items()} for g, q in measured_quantities(summarize(rows)).items()}


def heldout_medians(hw: Hardware) -> dict[str, float]:
    """The held-out kernel tables' medians |predicted / measured - 1| of the fresh limits every trimmed-plan profile
    exceeds (heldout_w3 all / gemm / reduction, unseen) and the clean fourth wave's GEMMs, as validate groups them
    (scripts/fresh_w3_drivers.medians): seconds, no kernel table."""
    from fresh_w3_drivers import medians

    m = medians(hw)
    keys = {("heldout_w3", "all", "unseen"), ("heldout_w3", "gemm", "unseen"), ("heldout_w3", "reduction", "unseen"),
            ("heldout_w4", "gemm", "unseen")}
    return {"/".join(k): v for k, v in m.items() if k in keys}


def light(names: list[str], profiles: Path, base_name: str, dirty: bool) -> int:
    """Per fitted profile NAME.yaml (calibration/h200/<wave*_NAME>/raw or runs/NAME/raw): the cold fits (ramp alone
    reproduced, joint) and the held-out medians own / joint against the fresh limits."""
    from sim.validate.fresh import FRESH_FILE_NAME, load_fresh

    fresh = load_fresh(ROOT / "validation" / FRESH_FILE_NAME)["limits"]
    base = load_profile(str(resolve_profile(base_name, ROOT)))
    keys = ["heldout_w3/all/unseen", "heldout_w3/gemm/unseen", "heldout_w3/reduction/unseen", "heldout_w4/gemm/unseen"]
    head = ["calibration", "ramp alone us", "joint ramp us [90 %]", "joint stream GB/s [90 %]"]
    head += [f"{k} median: own / joint (fresh limit)" for k in keys]
    print("| " + " | ".join(head) + " |\n|" + " --- |" * len(head), flush=True)
    for name in names:
        raws = sorted((ROOT / "calibration" / "h200").glob(f"wave*_{name}/raw")) or [ROOT / "calibration/h200/runs" / name / "raw"]
        hw = load_profile(str(profiles / f"{name}.yaml"))
        r = cold_fits(raws[0], hw, base, dirty)
        own_ramp = round(hw.gemm_cold_ramp_s * 1e6, 2) if hw.gemm_cold_ramp_s is not None else None
        assert own_ramp == r["alone"][0], (name, own_ramp, r["alone"][0])  # the fit's own ramp, reproduced
        a, j = heldout_medians(r["hw_alone"] if dirty else hw), heldout_medians(r["hw_joint"])
        ramp, rate, sp_ramp, sp_rate, _ = r["joint"]
        row = [name, f"{r['alone'][0]:g}", f"{ramp:g} {list(sp_ramp) if sp_ramp else ''}",
               f"{rate:.0f} {list(sp_rate) if sp_rate else ''}"]
        for k in keys:
            lim = (fresh.get(k) or {}).get("median_abs")
            row.append(f"{a[k]:.3f} / {j[k]:.3f} ({lim})")
        print("| " + " | ".join(row) + " |", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    from sim.validate.fresh import FRESH_FILE_NAME, exceeded, load_fresh

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", metavar="NAME", help="calibrations of DOC (default: all)")
    ap.add_argument("--repro", metavar="DOC")
    ap.add_argument("--profiles", metavar="DIR", help="the fitted profiles, NAME.yaml")
    ap.add_argument("--variants", action="store_true", help="the switch combinations on one profile (see above)")
    ap.add_argument("--profile", default="h200-measured", help="with --variants: the profile")
    ap.add_argument("--raw", default="calibration/h200/raw", help="with --variants: the profile's raw folder")
    ap.add_argument("--dirty", action="store_true", help="also fit and price the dirty flush's write-back")
    ap.add_argument("--base", default="h200-sxm", help="the base profile the calibrations were fitted over")
    ap.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    ap.add_argument("--split-cache", metavar="FILE",
                    help="keep the kernel table's calibrated/unseen split (one calibration of the shipped raw folder) here")
    ap.add_argument("--light", action="store_true",
                    help="with --profiles and NAMEs: the cold fits and the held-out medians only (no document needed)")
    ns = ap.parse_args(argv)
    if ns.light:
        return light(ns.names, Path(ns.profiles), ns.base, ns.dirty)
    _cache_the_kernel_split(Path(ns.split_cache) if ns.split_cache else None)
    if ns.variants:
        return variants(ns.profile, ROOT / ns.raw, ns.base)
    if not ns.repro or not ns.profiles:
        ap.error("--repro and --profiles are needed (or --variants)")
    doc = json.loads(Path(ns.repro).read_text())
    cals = {c["name"]: c for c in doc["calibrations"]}
    fresh = load_fresh(ROOT / "validation" / FRESH_FILE_NAME)["limits"]
    base = load_profile(str(resolve_profile(ns.base, ROOT)))
    names = ns.names or list(cals)
    head = ["calibration", "cold GEMMs", "ramp alone us", "joint ramp us [90 %]", "joint stream GB/s [90 %]"]
    if ns.dirty:
        head += ["write-back GB/s alone / joint"]
    head += ["fresh limits exceeded: own / alone" + (" + write-back" if ns.dirty else "") + " / joint", "what changes (joint)"]
    head += [f"{g} {k.split('_')[0]}: own / joint" for g, k in SHOWN]
    print("| " + " | ".join(head) + " |\n|" + " --- |" * len(head))
    out = {}
    for name in names:
        cal = cals[name]
        prof = Path(ns.profiles) / f"{name}.yaml"
        hw = load_profile(str(prof))
        raw_dir = Path(cal["raw_dir"]) if cal.get("raw_dir") else None
        if raw_dir is None or not (ROOT / raw_dir).is_dir():
            print(f"| {name} | no raw folder in the document |")
            continue
        own = cold_tables(hw)
        for g, q in own.items():  # the recomputation gives the document's quantities back
            for k, x in q.items():
                assert abs(cal["measured"][g][k] - x) <= 1e-6, (name, g, k, cal["measured"][g][k], x)
        r = cold_fits(ROOT / raw_dir, hw, base, ns.dirty)
        own_ramp = round(hw.gemm_cold_ramp_s * 1e6, 2) if hw.gemm_cold_ramp_s is not None else None
        assert own_ramp == r["alone"][0], (name, own_ramp, r["alone"][0])  # the fit's own ramp, reproduced
        alone_q = {**cal["measured"], **cold_tables(r["hw_alone"])} if ns.dirty else cal["measured"]
        joint_q = {**cal["measured"], **cold_tables(r["hw_joint"])}
        ex_own, ex_alone, ex_joint = (exceeded(q, fresh) for q in (cal["measured"], alone_q, joint_q))
        changed = sorted(set(ex_alone) ^ set(ex_joint))
        ramp, rate, sp_ramp, sp_rate, wb = r["joint"]
        row = [name, str(r["n"]), f"{r['alone'][0]:g}", f"{ramp:g} {list(sp_ramp) if sp_ramp else ''}",
               f"{rate:.0f} {list(sp_rate) if sp_rate else ''}"]
        if ns.dirty:
            row += [f"{r['alone'][1]} / {wb}"]
        row += [f"{len(ex_own)} / {len(ex_alone)} / {len(ex_joint)}",
                "; ".join(("− " if x in ex_alone else "+ ") + x for x in changed) or "—"]
        row += [f"{alone_q[g][k]:.3f} / {joint_q[g][k]:.3f}" if g in joint_q and k in joint_q[g] else "—" for g, k in SHOWN]
        print("| " + " | ".join(row) + " |", flush=True)
        out[name] = {"ramp_alone_us": r["alone"][0], "writeback_alone_gbps": r["alone"][1], "ramp_us": ramp,
                     "ramp_spread": sp_ramp, "stream_gbps": rate, "stream_spread": sp_rate, "writeback_gbps": wb,
                     "exceeded_own": ex_own, "exceeded_alone": ex_alone, "exceeded_joint": ex_joint,
                     "shown_alone": {f"{g}:{k}": alone_q[g].get(k) for g, k in SHOWN if g in alone_q},
                     "shown_joint": {f"{g}:{k}": joint_q[g].get(k) for g, k in SHOWN if g in joint_q}}
    if ns.json:
        Path(ns.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
