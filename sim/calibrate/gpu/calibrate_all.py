"""Every measurement a calibrated profile is fitted from, in one command (the GPU side of
`kernelsim calibrate`).

    python3 -m sim.calibrate.gpu.calibrate_all --out DIR [--quick] [--budget-s S]

Runs, each in its own subprocess so one failure cannot poison the next: the microbenchmark
groups (sim.calibrate.gpu.micro), host costs (in rounds, see host_costs), kernel launch
configurations, sustained load, profiler overhead, stream gaps and the default-backend
attention and math-op kernels (sim.calibrate.gpu.fit_groups). Writes DIR/<group>.json for each
and DIR/calibrate_all.json with the wall time and exit status of every step. Does no fitting
(the fit runs anywhere: `kernelsim calibrate --from-raw DIR`).

--budget-s bounds the whole run: a step still running when the budget is spent is stopped
(its group file keeps the records written so far, status `running`) and later steps are
skipped; calibrate_all.json says which.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time


def steps(out: str, quick: bool) -> list[list[str]]:
    """The measurement steps, in order; `kernelsim calibrate` runs exactly these."""
    py = sys.executable
    return [
        [py, "-m", "sim.calibrate.gpu.micro", "--mode", "quick" if quick else "full", "--out", out],
        [py, "-m", "sim.calibrate.gpu.host_costs", "--out", out, "--runs", "2" if quick else "3"],
        [py, "-m", "sim.calibrate.gpu.kernel_configs", "--out", out],
        [py, "-m", "sim.calibrate.gpu.sustained", "--out", out],
        [py, "-m", "sim.calibrate.gpu.profiler_overhead", "--no-traces", "--out", out],
        [py, "-m", "sim.calibrate.gpu.stream_gaps", "--out", out],
        [py, "-m", "sim.calibrate.gpu.fit_groups", "--out", out, "--budget-s", "45"],
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="raw folder to write")
    ap.add_argument("--quick", action="store_true", help="microbenchmarks in quick mode")
    ap.add_argument("--budget-s", type=float, default=None, help="stop the run after this many seconds")
    ap.add_argument("--dry-run", action="store_true", help="print the steps and exit")
    ns = ap.parse_args(argv)
    if ns.dry_run:
        for cmd in steps(ns.out, ns.quick):
            print(" ".join(cmd[1:]))
        return 0
    os.makedirs(ns.out, exist_ok=True)
    log: list[dict[str, object]] = []
    t_all = time.time()
    failed = 0
    for cmd in steps(ns.out, ns.quick):
        left = None if ns.budget_s is None else ns.budget_s - (time.time() - t_all)
        if left is not None and left <= 1.0:
            log.append({"step": cmd[2], "rc": None, "skipped": "time budget spent"})
            failed += 1
            print(f"== {cmd[2]}: skipped (time budget spent)", flush=True)
            continue
        print(f"== measuring: {' '.join(cmd[1:])}", flush=True)
        t0 = time.time()
        try:
            rc = subprocess.run(cmd, timeout=left).returncode
        except subprocess.TimeoutExpired:
            rc = -9
            print(f"== {cmd[2]}: stopped at the time budget", flush=True)
        log.append({"step": cmd[2], "rc": rc, "wall_s": round(time.time() - t0, 2)})
        failed += rc != 0
        print(f"== {cmd[2]}: exit {rc}, {time.time() - t0:.1f} s", flush=True)
    doc = {"steps": log, "wall_s": round(time.time() - t_all, 2), "quick": ns.quick, "budget_s": ns.budget_s,
           "command": os.environ.get("KS_COMMAND") or " ".join(sys.argv)}
    with open(os.path.join(ns.out, "calibrate_all.json"), "w") as fh:
        json.dump(doc, fh, indent=1)
    print(f"== calibration measurements: {doc['wall_s']} s, {failed} failed step(s)", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
