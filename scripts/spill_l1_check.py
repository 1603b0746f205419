"""Spilling Triton configs on held-out data, with the profile's `memory.spill_l1_partial` off and on (issue 18)

    python scripts/spill_l1_check.py [--profile h200-measured] [--rows]

Prints sim.validate.spills' table (per held-out machine and calibration folder, per spill regime: configs,
median |error| and signed range, the switch off and on with its spill constants refitted), then the
fused-config micro-gain quantities that validate gates (sim.validate.fused_configs), off and on. Only reads
committed data.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sim.hardware import load_profile  # noqa: E402
from sim.validate.fused_configs import config_gains, config_quantities, fused_config_times  # noqa: E402
from sim.validate.spills import regime_rows, regime_table, switch_profiles  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--profile", default="h200-measured")
    ap.add_argument("--rows", action="store_true", help="print every config too")
    args = ap.parse_args(argv)
    base = load_profile(args.profile)
    off, on = switch_profiles(base, ROOT)
    print(f"profile {args.profile} (memory.spill_l1_partial shipped: {base.spill_l1_partial}); switch on: spill constants"
          f" refitted (spill_gbps {on.spill_bps / 1e9:.0f}, spill_offchip_gbps {(on.spill_offchip_bps or 0) / 1e9:.0f},"
          f" spill_inflight_bytes_per_thread {on.spill_inflight_bytes_per_thread}; shipped {off.spill_bps / 1e9:.0f},"
          f" {(off.spill_offchip_bps or 0) / 1e9:.0f}, {off.spill_inflight_bytes_per_thread})\n")
    rows = regime_rows(base, ROOT)
    print(regime_table(rows))
    if args.rows:
        for r in rows:
            for label, meas, e_off, e_on in zip(r.labels, r.measured_us, r.error_off, r.error_on, strict=True):
                print(f"{r.source:13s} {r.regime:8s} {label:60s} {meas:9.2f} us  off {100 * e_off:+6.1f} %"
                      f"  on {100 * e_on:+6.1f} %")
    for name, hw in (("off", off), ("on", on)):
        gains, ranks = config_gains(fused_config_times(hw, ROOT))
        for key, q in config_quantities(gains, ranks).items():
            print(f"{key} [switch {name}]: median |micro gain error| {q['median_abs_pp']:.2f} pp, "
                  f"wrong pairs {int(q['wrong_pairs'])} of {int(q['pairs'])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
