"""Every measurement a calibrated profile is fitted from, in one command (the GPU side of
`kernelsim calibrate`).

    python3 -m sim.calibrate.gpu.calibrate_all --out DIR [--quick]

Runs, each in its own subprocess so one failure cannot poison the next: the microbenchmark
groups (sim.calibrate.gpu.micro), host costs, kernel launch configurations, sustained load,
profiler overhead and stream gaps. Writes DIR/<group>.json for each and DIR/calibrate_all.json
with the wall time and exit status of every step. Does no fitting (the fit runs anywhere:
`kernelsim calibrate --from-raw DIR`).
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
        [py, "-m", "sim.calibrate.gpu.host_costs", "--out", out],
        [py, "-m", "sim.calibrate.gpu.kernel_configs", "--out", out],
        [py, "-m", "sim.calibrate.gpu.sustained", "--out", out],
        [py, "-m", "sim.calibrate.gpu.profiler_overhead", "--no-traces", "--out", out],
        [py, "-m", "sim.calibrate.gpu.stream_gaps", "--out", out],
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="raw folder to write")
    ap.add_argument("--quick", action="store_true", help="microbenchmarks in quick mode")
    ns = ap.parse_args(argv)
    os.makedirs(ns.out, exist_ok=True)
    log: list[dict[str, object]] = []
    t_all = time.time()
    failed = 0
    for cmd in steps(ns.out, ns.quick):
        print(f"== measuring: {' '.join(cmd[1:])}", flush=True)
        t0 = time.time()
        rc = subprocess.run(cmd).returncode
        log.append({"step": cmd[2], "rc": rc, "wall_s": round(time.time() - t0, 2)})
        failed += rc != 0
        print(f"== {cmd[2]}: exit {rc}, {time.time() - t0:.1f} s", flush=True)
    doc = {"steps": log, "wall_s": round(time.time() - t_all, 2), "quick": ns.quick,
           "command": os.environ.get("KS_COMMAND") or " ".join(sys.argv)}
    with open(os.path.join(ns.out, "calibrate_all.json"), "w") as fh:
        json.dump(doc, fh, indent=1)
    print(f"== calibration measurements: {doc['wall_s']} s, {failed} failed step(s)", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
