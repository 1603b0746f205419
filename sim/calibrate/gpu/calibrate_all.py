"""Every measurement a calibrated profile is fitted from, in one command (the GPU side of
`kernelsim calibrate`).

    python3 -m sim.calibrate.gpu.calibrate_all --out DIR [--quick] [--budget-s S]

Runs, each in its own subprocess so one failure cannot poison the next: the microbenchmark
groups (sim.calibrate.gpu.micro; not `streams`, which nothing reads: FULL_SKIPS), host costs (in rounds, see host_costs), kernel launch
configurations, the cold-L2 group (sim.calibrate.gpu.l2_cold: calibration-split GEMMs, sums and
copies after a read-only L2 flush, behind kernel.memcpy_clean_fixed_us, gemm.cold_ramp_us and the
cold reduction fits), sustained GEMM load (power.sustained_clock_mhz), profiler overhead, stream gaps, and (sim.calibrate.gpu.fit_groups,
one process) the default-backend attention and math-op kernels and the register sweep's kernel on
small grids where its spills overflow L1 (register_small --fit-only: behind the spills' off-chip
ceiling and in-flight bytes). Writes DIR/<group>.json for each
and DIR/calibrate_all.json with the wall time and exit status of every step. Does no fitting
(the fit runs anywhere: `kernelsim calibrate --from-raw DIR`).

--quick (target: at most 90 s of GPU time) measures only the groups the predictions depend on
most, in order of their weight on the validated step and kernel cases: the host costs that move
step predictions most between machines (host_costs, two rounds; kernel_overhead), the memory and
compute groups behind the bandwidth, unit-cost and GEMM fits (copy, elementwise, gemm, in the
microbenchmarks' quick mode), and the short profiled kernels plus the stream gap behind
kernel.fixed_us (kernel_configs, stream_gaps with two steps). It skips the groups whose fitted
numbers vary least between the five committed calibrations or price only profiled/traced runs
(QUICK_SKIPS): a quick profile keeps the base profile's numbers there, with the base profile's
provenance, and calibrate_all.json lists them under `skipped_groups`. Without --budget-s a quick
run stops at QUICK_BUDGET_S.

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

QUICK_MICRO_GROUPS = ("copy", "kernel_overhead", "elementwise", "gemm")
# group -> why no calibration measures it (the microbenchmarks still run it with `micro --groups`)
FULL_SKIPS = {
    "streams": "two-stream overlap scenarios: read by no fit and no validation group (8.3 s of machine K's "
               "calibration, wave 9)",
}
# micro.GROUPS less FULL_SKIPS (not imported: micro is the GPU side; tests check the two agree)
FULL_MICRO_GROUPS = ("copy", "kernel_overhead", "elementwise", "register_sweep", "gemm", "attention", "reduction",
                     "layout")
QUICK_BUDGET_S = 88.0
# group -> why a quick calibration keeps the base profile's numbers for it
QUICK_SKIPS = {
    "register_sweep": "register allocation fits: 0-7 % spread over the five full calibrations",
    "attention": "not read by any fit (validation cases only)",
    "reduction": "not read by any fit (validation cases only)",
    "layout": "not read by any fit (validation cases only)",
    "sustained": "power-capped clock: 2.2 % spread over the five full calibrations",
    "profiler_overhead": "prices only traced (profiled) runs, not the simulated step",
    "attention_default": "cuDNN attention fit: an opt-in backend, not the profile default",
    "math_ops": "math-op costs of the Triton K-sweep (estimates elsewhere)",
    "register_small": "spill off-chip ceiling and in-flight bytes from small grids: about 15 s, more than "
                      "the quick budget has left (and its fit needs the register sweep, skipped too)",
    "l2_cold": "cold-L2 copy, GEMM ramp, reduction, layer norm, warp softmax and softmax backward fits: about 30 s with its "
               "process start, and the quick steps already fill the budget (Q: 88.2 s without it)",
}


def steps(out: str, quick: bool) -> list[list[str]]:
    """The measurement steps, in order; `kernelsim calibrate` runs exactly these."""
    py = sys.executable
    if quick:
        return [
            [py, "-m", "sim.calibrate.gpu.micro", "--mode", "quick", "--groups", ",".join(QUICK_MICRO_GROUPS),
             "--out", out],
            [py, "-m", "sim.calibrate.gpu.host_costs", "--out", out, "--runs", "2"],
            [py, "-m", "sim.calibrate.gpu.kernel_configs", "--out", out],
            [py, "-m", "sim.calibrate.gpu.stream_gaps", "--out", out, "--steps", "2"],
        ]
    return [
        [py, "-m", "sim.calibrate.gpu.micro", "--mode", "full", "--groups", ",".join(FULL_MICRO_GROUPS), "--out", out],
        [py, "-m", "sim.calibrate.gpu.host_costs", "--out", out, "--runs", "3"],
        [py, "-m", "sim.calibrate.gpu.kernel_configs", "--out", out],
        [py, "-m", "sim.calibrate.gpu.l2_cold", "--out", out, "--budget-s", "55"],
        [py, "-m", "sim.calibrate.gpu.sustained", "--out", out, "--loads", "gemm"],
        [py, "-m", "sim.calibrate.gpu.profiler_overhead", "--no-traces", "--out", out],
        # 12 profiled steps (200 gaps on machine Z, calibration/h200/wave8_calib6) rather than 3: the gap
        # is the median of a wide distribution (0.8-2.5 us by kernel pair); over 3 steps its median moved
        # 1.34-1.57 us between machines, and Z's four 3-step quarters gave 1.50-1.58 us
        [py, "-m", "sim.calibrate.gpu.stream_gaps", "--out", out, "--steps", "12"],
        [py, "-m", "sim.calibrate.gpu.fit_groups", "--out", out, "--budget-s", "80"],
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="raw folder to write")
    ap.add_argument("--quick", action="store_true",
                    help=f"the subset that matters most (at most 90 s; budget {QUICK_BUDGET_S:g} s unless --budget-s)")
    ap.add_argument("--budget-s", type=float, default=None, help="stop the run after this many seconds")
    ap.add_argument("--dry-run", action="store_true", help="print the steps and exit")
    ns = ap.parse_args(argv)
    if ns.quick and ns.budget_s is None:
        ns.budget_s = QUICK_BUDGET_S
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
           "skipped_groups": dict(QUICK_SKIPS) if ns.quick else {},
           "command": os.environ.get("KS_COMMAND") or " ".join(sys.argv)}
    with open(os.path.join(ns.out, "calibrate_all.json"), "w") as fh:
        json.dump(doc, fh, indent=1)
    print(f"== calibration measurements: {doc['wall_s']} s, {failed} failed step(s)", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
