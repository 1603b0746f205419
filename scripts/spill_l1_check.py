"""Spilling Triton configs on held-out data, with the profile's `memory.spill_l1_partial` off and on (issue 18)

    python scripts/spill_l1_check.py [--profile h200-measured] [--rows]

Prices every fused bias+GELU+dropout record that spills (Triton n_spills > 0) of the held-out machines A, C
(validation/h200/heldout_kernels), F (validation/h200/machine_F, held out by machine) and wave 4 (clean L2),
and of the calibration's register groups (the shipped raw folder and machine M's, calibration/h200/wave12_M),
once with the shipped switch and once with it on. Rows are grouped by spill regime:

- `l1`: spills whose footprint (every resident thread's spill area) fits in L1, and that still fits with the
  input lines of the threads' loads in flight added;
- `l1_edge`: spills that fit alone but not with the loads in flight (the backward kernels at 64 elements per
  thread, 238-242 spilled words: the regime the switch changes);
- `offchip`: spills past L1 on their own (the allocator's 32-register configs of 128+ elements per thread).

Prints per source and regime: rows, median |error| and the signed range, off → on; then the fused-config
micro-gain quantities that validate gates (sim.validate.fused_configs), off → on. Only reads committed data.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sim.calibrate.cases import Case  # noqa: E402
from sim.calibrate.heldout_cases import heldout_cases  # noqa: E402
from sim.calibrate.raw import load_raw  # noqa: E402
from sim.calibrate.unit_fit import _register_cases, fit_spills  # noqa: E402
from sim.hardware import Hardware, load_profile  # noqa: E402
from sim.validate.fused_configs import config_gains, config_quantities, fused_config_times  # noqa: E402
from sim.validate.wave2 import WAVE4_KERNELS  # noqa: E402


def _regime(case: Case, hw: Hardware) -> str:
    """The spill regime of one spilling config (see the module docstring), from the model's own footprint."""
    on = case.predict(dataclasses.replace(hw, spill_l1_partial=True))[0].detail
    off = case.predict(dataclasses.replace(hw, spill_l1_partial=False))[0].detail
    if off["spill_offchip"]:
        return "offchip"
    return "l1_edge" if on["spill_offchip"] else "l1"


def _heldout(path: Path, keep: Any = None) -> list[Case]:
    out = []
    for case in heldout_cases(path):
        rec = case.record
        if case.family != "fused_heldout" or case.measured_us <= 0 or not rec.get("n_spills"):
            continue
        if keep is not None and not keep(rec):
            continue
        if rec.get("timing") == "profiled":
            case = dataclasses.replace(case, profiled=True)
        out.append(case)
    return out


def sources() -> dict[str, list[Case]]:
    heldout = ROOT / "validation" / "h200"
    out = {
        "A": _heldout(heldout / "heldout_kernels" / "A.json"),
        "C": _heldout(heldout / "heldout_kernels" / "C.json"),
        "F": _heldout(heldout / "machine_F" / "heldout_kernels.json"),
        "w4": _heldout(ROOT / WAVE4_KERNELS, lambda r: r.get("l2_state") == "clean" and not r.get("uneven_calls")),
    }
    for name, raw_dir in (("calibration", ROOT / "calibration" / "h200" / "raw"),
                          ("calibration M", ROOT / "calibration" / "h200" / "wave12_M" / "raw")):
        if raw_dir.is_dir():
            out[name] = [c for c in _register_cases(load_raw(raw_dir)) if c.record.get("n_spills") and c.measured_us > 0]
    return out


def _stats(errors: list[float]) -> str:
    if not errors:
        return "—"
    return (f"{100 * statistics.median(abs(e) for e in errors):5.1f} % "
            f"[{100 * min(errors):+6.1f} … {100 * max(errors):+6.1f}]")


def refit(hw: Hardware) -> Hardware:
    """The profile with its spill constants fitted again on the shipped raw folder, as the calibration
    would fit them with this profile's switch (the shipped ones were fitted with it off)."""
    scale = {"spill_gbps": ("spill_bps", 1e9), "spill_offchip_gbps": ("spill_offchip_bps", 1e9),
             "spill_inflight_bytes_per_thread": ("spill_inflight_bytes_per_thread", 1.0)}
    for v in fit_spills(load_raw(ROOT / "calibration" / "h200" / "raw"), hw):
        attr, mult = scale[v.key]
        hw = dataclasses.replace(hw, **{attr: float(v.value) * mult})  # type: ignore[arg-type]
    return hw


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="h200-measured")
    ap.add_argument("--rows", action="store_true", help="print every row too")
    args = ap.parse_args(argv)
    base = load_profile(args.profile)
    off, on = dataclasses.replace(base, spill_l1_partial=False), refit(dataclasses.replace(base, spill_l1_partial=True))
    print(f"profile {args.profile} (memory.spill_l1_partial shipped: {base.spill_l1_partial}); on: spill constants"
          f" refitted on the shipped raw folder with the switch on (sim.calibrate.unit_fit.fit_spills):"
          f" spill_gbps {on.spill_bps / 1e9:.0f}, spill_offchip_gbps {(on.spill_offchip_bps or 0) / 1e9:.0f},"
          f" spill_inflight_bytes_per_thread {on.spill_inflight_bytes_per_thread}"
          f" (shipped {off.spill_bps / 1e9:.0f}, {(off.spill_offchip_bps or 0) / 1e9:.0f},"
          f" {off.spill_inflight_bytes_per_thread})")
    print("source          regime    rows  median |error| [min … max], off  →  on")
    for name, cases in sources().items():
        by: dict[str, list[tuple[Case, float, float]]] = {}
        for c in cases:
            by.setdefault(_regime(c, base), []).append((c, c.predicted_us(off) / c.measured_us - 1,
                                                        c.predicted_us(on) / c.measured_us - 1))
        for regime in ("l1", "l1_edge", "offchip"):
            rows = by.get(regime, [])
            if not rows:
                continue
            print(f"{name:15s} {regime:8s} {len(rows):5d}  {_stats([r[1] for r in rows])}  →  {_stats([r[2] for r in rows])}")
            if args.rows:
                for c, e_off, e_on in rows:
                    print(f"    {c.label:60s} measured {c.measured_us:9.2f} us  off {100 * e_off:+6.1f} %  on {100 * e_on:+6.1f} %")
    for label, hw in (("off", off), ("on", on)):
        gains, ranks = config_gains(fused_config_times(hw, ROOT))
        for key, q in config_quantities(gains, ranks).items():
            print(f"{key} [{label}]: median |micro gain error| {q['median_abs_pp']:.2f} pp, "
                  f"wrong pairs {int(q['wrong_pairs'])} of {int(q['pairs'])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
