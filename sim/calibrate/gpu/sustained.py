"""Sustained load: how kernel times drift when the GPU runs long enough to reach its power limit.

    python3 -m sim.calibrate.gpu.sustained --out DIR [--seconds 3] [--loads gemm[,copy]]

For each load (a bf16 GEMM: the sustained clock's fit; with --loads gemm,copy also a large copy: the
check that memory-bound work keeps its clock, measured by every calibration until wave 10), it
times the kernel in a burst after an idle pause, then back to back for `seconds`, recording
the time of every launch with CUDA events, while a thread samples nvidia-smi (SM clock,
power draw). Writes DIR/sustained.json = {"meta", "group": "sustained", "records"}.
Never changes GPU settings: it only reads them.
"""

from __future__ import annotations

import argparse
import subprocess
import threading
import time
from typing import Any

from . import common


def _sampler(stop: threading.Event, out: list[dict[str, float]], t0: float) -> None:
    cmd = ["nvidia-smi", "--query-gpu=clocks.sm,power.draw,temperature.gpu", "--format=csv,noheader,nounits"]
    while not stop.is_set():
        try:
            line = subprocess.run(cmd, capture_output=True, text=True, timeout=2).stdout.strip().splitlines()[0]
            clk, pw, temp = (float(v) for v in line.split(","))
            out.append({"t_s": round(time.time() - t0, 3), "sm_clock_mhz": clk, "power_w": pw, "temp_c": temp})
        except Exception:  # noqa: BLE001 - a missed sample is not fatal
            pass
        stop.wait(0.1)


def run_load(name: str, fn: Any, seconds: float) -> dict[str, Any]:
    import torch

    fn()
    torch.cuda.synchronize()
    time.sleep(0.5)  # idle: the clock recovers
    burst = []
    for _ in range(5):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        burst.append(s.elapsed_time(e) * 1e3)
        time.sleep(0.2)
    samples: list[dict[str, float]] = []
    stop = threading.Event()
    t0 = time.time()
    th = threading.Thread(target=_sampler, args=(stop, samples, t0), daemon=True)
    th.start()
    events = []
    deadline = time.time() + seconds
    while time.time() < deadline:
        batch = []
        for _ in range(20):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            batch.append((s, e))
        events.append((time.time() - t0, batch))
        if len(events) > 2:  # keep the host at most two batches ahead
            events[-3][1][-1][1].synchronize()
    torch.cuda.synchronize()
    stop.set()
    th.join(timeout=3)
    series = [{"t_s": round(t, 3), "time_us": round(sorted(s.elapsed_time(e) for s, e in batch)[len(batch) // 2] * 1e3, 3)}
              for t, batch in events]
    steady = [p["time_us"] for p in series if p["t_s"] >= seconds * 0.6]
    rec = {"bench": "sustained", "load": name, "seconds": seconds,
           "burst_us": sorted(burst)[len(burst) // 2], "burst_samples_us": [round(b, 3) for b in burst],
           "steady_us": sorted(steady)[len(steady) // 2] if steady else None,
           "series": series[:: max(1, len(series) // 60)], "smi": samples[:: max(1, len(samples) // 60)]}
    rec["steady_over_burst"] = rec["steady_us"] / rec["burst_us"] if rec["steady_us"] else None
    common.log(f"{name}: burst {rec['burst_us']:.1f} us, steady {rec['steady_us']} us, ratio {rec['steady_over_burst']}")
    return rec


def run(out_dir: str, seconds: float, names: tuple[str, ...] = ("gemm",)) -> None:
    import torch

    bf = torch.bfloat16
    a = torch.randn(4096, 4096, device="cuda", dtype=bf)
    b = torch.randn(4096, 16384, device="cuda", dtype=bf)
    src = torch.randn(256 << 20, device="cuda", dtype=bf)  # 512 MiB
    dst = torch.empty_like(src)

    def gemm() -> None:
        torch.mm(a, b)

    def copy() -> None:
        dst.copy_(src)

    # A third load (GEMM then GELU) ran until wave 7, and the copy below until wave 10: no fit reads either
    # (the copy was the check that memory-bound work keeps its clock: steady/burst 0.66-0.79 in the 13 full
    # calibrations A-E, Q_full, S, T, V, W, X, Y and K, never slower), and each cost about 5 s of the full
    # calibration's 5 minutes; the committed raw folders keep them. `--loads gemm,copy` measures the copy.
    loads = {"gemm": ("gemm_4096x16384x4096_bf16", gemm), "copy": ("copy_1GiB", copy)}
    records = [run_load(*loads[name], seconds) for name in names]
    common.write_group(out_dir, "sustained", records, "sim.calibrate.gpu.sustained")


LOADS = ("gemm", "copy")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--loads", default="gemm", help="comma list of: gemm (the fit's), copy (default: gemm)")
    ns = ap.parse_args(argv)
    names = tuple(n.strip() for n in ns.loads.split(",") if n.strip())
    if not names or any(n not in LOADS for n in names):
        print(f"error: --loads: {ns.loads!r} (expected a comma list of {', '.join(LOADS)})")
        return 2
    run(ns.out, ns.seconds, names)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
