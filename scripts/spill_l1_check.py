"""Spilling Triton configs on held-out data under the three spill rules (issue 18)

    python scripts/spill_l1_check.py [--profile h200-measured] [--rows]

Prints sim.validate.spills' table (per held-out machine and calibration folder, per spill regime: configs,
median |error| and signed range under each rule — spill areas stored once and loaded once, the L1 miss share
of memory.spill_l1_partial, the compiled kernels' local accesses of memory.spill_traffic_from_accesses — each
with its spill constants refitted), then the fused-config micro-gain quantities that validate gates
(sim.validate.fused_configs) under each rule. Only reads committed data.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sim.hardware import load_profile  # noqa: E402
from sim.validate.fused_configs import config_gains, config_quantities, fused_config_times  # noqa: E402
from sim.validate.spills import RULES, regime_rows, regime_table, rule_profiles, shipped_rule  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--profile", default="h200-measured")
    ap.add_argument("--rows", action="store_true", help="print every config too")
    args = ap.parse_args(argv)
    base = load_profile(args.profile)
    profiles = rule_profiles(base, ROOT)
    print(f"profile {args.profile} (shipped rule: {shipped_rule(base)}); spill constants refitted per rule:")
    for rule, hw in profiles.items():
        print(f"  {rule:10s} spill_gbps {hw.spill_bps / 1e9:.0f}, spill_offchip_gbps {(hw.spill_offchip_bps or 0) / 1e9:.0f},"
              f" spill_inflight_bytes_per_thread {hw.spill_inflight_bytes_per_thread},"
              f" spill_offchip_traffic_ratio {hw.spill_offchip_traffic_ratio}")
    print()
    rows = regime_rows(base, ROOT)
    print(regime_table(rows, shipped_rule(base)))
    if args.rows:
        for r in rows:
            for i, (label, meas) in enumerate(zip(r.labels, r.measured_us, strict=True)):
                errs = "  ".join(f"{rule} {100 * r.errors[rule][i]:+6.1f} %" for rule in RULES)
                print(f"{r.source:13s} {r.regime:8s} {label:60s} {meas:9.2f} us  {errs}")
    for name, hw in profiles.items():
        gains, ranks = config_gains(fused_config_times(hw, ROOT))
        for key, q in config_quantities(gains, ranks).items():
            print(f"{key} [{name}]: median |micro gain error| {q['median_abs_pp']:.2f} pp, "
                  f"wrong pairs {int(q['wrong_pairs'])} of {int(q['pairs'])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
