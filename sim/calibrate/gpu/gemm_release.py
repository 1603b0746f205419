"""Issue 20, calibration split, one GPU: a persistent GEMM started while k SMs are held, the holder
releasing them part-way through the GEMM.

In DDP's backward a bucket's all-reduce (24 NCCL CTAs, one per SM) is often resident when the next
GEMM starts and ends before the GEMM does. What the GEMM loses then decides the exposed
communication. Two answers differ by a factor of two: the CTAs that found no SM start when the holder
releases its SMs and then do all their own tiles (a static persistent schedule: the loss is about the
overlap), or the resident CTAs take over the work (a dynamic schedule: the loss is the overlap times
k / SMs, plus the last round's rounding). Stage sm_share of sim.calibrate.gpu.comm measured only
holders that outlast the GEMM. This measures the release.

Per GEMM shape (calibration split: no DDP validation workload runs these shapes; 1, 1.5, 2, 4 and 8
rounds of 256x128 tiles on 132 SMs) and per holder of k one-thread spin kernels (torch.cuda._sleep on
k streams; they move no memory): the GEMM alone, then one GEMM call started `delay` after the spins
while they run on for f x its time alone (f in RELEASE_FRACTIONS; "hold" = they outlast it). Each cell:
the GEMM's time (CUDA events around the one call on its own stream), median of the repetitions, and
when the spins ended (event after them). The GEMM's kernels' launch configurations are recorded.

    python3 -m sim.calibrate.gpu.gemm_release --out DIR [--budget-s S] [--reps N] [--smoke] [--dry-run]

Writes DIR/gemm_release.json. stdlib + torch only; never changes GPU settings. Sets
CUDA_DEVICE_MAX_CONNECTIONS=32 (if unset) before CUDA starts, so the spin streams do not serialise.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from typing import Any

from . import common

# (m, n, k) bf16, C = A @ B: output tiles of 256x128 on 132 SMs = 1, 1.45, 2, 4, 8 rounds
SHAPES = ((2048, 2048, 4096), (3072, 2048, 4096), (4096, 2048, 4096), (4096, 4096, 2048), (8192, 4096, 2048))
SPINS = (8, 24)
RELEASE_FRACTIONS = (0.25, 0.5, 0.75, 1.0, 1.5)
HOLD = "hold"
DELAY_US = 30.0  # the GEMM starts this long after the spins (they are resident first)
GATE_US = 3000.0  # every stream waits for a spin this long on the default stream (the host enqueues meanwhile)


def plan(smoke: bool = False) -> list[tuple[tuple[int, int, int], int, float | str]]:
    """(shape, spin kernels, release fraction or HOLD) per cell, alone cells excluded."""
    out: list[tuple[tuple[int, int, int], int, float | str]] = []
    for shape in SHAPES[:1] if smoke else SHAPES:
        for k in SPINS[-1:] if smoke else SPINS:
            for f in (*RELEASE_FRACTIONS, HOLD):
                out.append((shape, k, f))
    return out


def _kernels(fn: Any) -> list[dict[str, Any]]:
    """The GPU kernels of one call of fn under torch.profiler, with their launch configuration."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as fh:
            events = json.load(fh).get("traceEvents", [])
    out = []
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "kernel":
            a = e.get("args") or {}
            out.append({"name": str(e.get("name", ""))[:160], "dur_us": float(e.get("dur", 0.0)),
                        **{k: a.get(k) for k in ("grid", "block", "registers per thread", "shared memory",
                                                 "blocks per SM") if k in a}})
    return out[:4]


class Ctx:
    def __init__(self, out: str, smoke: bool, budget_s: float, reps: int) -> None:
        self.rf = common.ResultFile(os.path.join(out, "gemm_release.json"), "gemm_release",
                                    common.collect_meta({"mode": "smoke" if smoke else "full", "delay_us": DELAY_US,
                                                         "gate_us": GATE_US,
                                                         "reps": reps,
                                                         "cuda_device_max_connections":
                                                             os.environ.get("CUDA_DEVICE_MAX_CONNECTIONS")}))
        self.deadline = time.time() + budget_s
        self.reps = reps

    def expired(self) -> bool:
        return time.time() > self.deadline


def run(c: Ctx, cells: list[tuple[tuple[int, int, int], int, float | str]]) -> None:
    import torch

    ev = lambda: torch.cuda.Event(enable_timing=True)  # noqa: E731
    s_gemm = torch.cuda.Stream()
    spin_streams = [torch.cuda.Stream() for _ in range(max(SPINS))]
    # cycles per us of torch.cuda._sleep
    torch.cuda._sleep(1000)
    torch.cuda.synchronize()
    a, b = ev(), ev()
    a.record()
    torch.cuda._sleep(20_000_000)
    b.record()
    torch.cuda.synchronize()
    cyc_per_us = 20_000_000 / max(a.elapsed_time(b) * 1e3, 1.0)
    c.rf.doc["meta"]["sleep_cycles_per_us"] = cyc_per_us
    c.rf.doc["meta"]["sm_count"] = torch.cuda.get_device_properties(0).multi_processor_count

    def once(gemm: Any, k: int, hold_us: float | None) -> dict[str, float]:
        """One GEMM call on s_gemm, beside k spins lasting DELAY_US + hold_us (none: alone)."""
        torch.cuda.synchronize()
        ref = ev()
        ref.record()
        # a gate on the default stream: every spin stream and the GEMM stream wait for it, so the spins
        # start together once the host has enqueued them all (24 launches take ~0.5-1 ms of host time;
        # wave 8's first run had no gate and its spins started and ended staggered)
        torch.cuda._sleep(int(GATE_US * cyc_per_us))
        gate = ev()
        gate.record()
        ends = []
        if hold_us is not None:
            cycles = int((DELAY_US + hold_us) * cyc_per_us)
            for st in spin_streams[:k]:
                st.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(st):
                    torch.cuda._sleep(cycles)
                en = ev()
                en.record(st)
                ends.append(en)
        s_gemm.wait_stream(torch.cuda.current_stream())
        g0, g1 = ev(), ev()
        with torch.cuda.stream(s_gemm):
            torch.cuda._sleep(int(DELAY_US * cyc_per_us))
            g0.record(s_gemm)
            gemm()
            g1.record(s_gemm)
        torch.cuda.synchronize()
        t0, t1 = ref.elapsed_time(g0) * 1e3, ref.elapsed_time(g1) * 1e3
        out = {"gemm_us": t1 - t0, "start_after_gate_us": t0 - ref.elapsed_time(gate) * 1e3}
        if ends:
            released = [ref.elapsed_time(e) * 1e3 - t0 for e in ends]
            out["release_after_start_us"] = min(released)
            out["release_last_after_start_us"] = max(released)
        return out

    by_shape: dict[tuple[int, int, int], list[tuple[int, float | str]]] = {}
    for shape, k, f in cells:
        by_shape.setdefault(shape, []).append((k, f))
    for shape, todo in by_shape.items():
        if c.expired():
            c.rf.doc["truncated"] = True
            return

        def measure(shape: tuple[int, int, int] = shape, todo: list[tuple[int, float | str]] = todo) -> None:
            m, n, kk = shape
            x = torch.randn(m, kk, device="cuda", dtype=torch.bfloat16)
            w = torch.randn(kk, n, device="cuda", dtype=torch.bfloat16)
            y = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)

            def gemm() -> None:
                torch.mm(x, w, out=y)

            for _ in range(5):
                gemm()
            alone_runs = [once(gemm, 0, None)["gemm_us"] for _ in range(c.reps)]
            alone = statistics.median(alone_runs)
            cells_out: list[dict[str, Any]] = []
            for k, f in todo:
                if c.expired():
                    c.rf.doc["truncated"] = True
                    break
                hold_us = 3.0 * alone + 200.0 if f == HOLD else float(f) * alone
                runs = [once(gemm, k, hold_us) for _ in range(c.reps)]
                cells_out.append({"spin_kernels": k, "release_fraction": f, "hold_us": hold_us,
                                  "gemm_us": statistics.median(r["gemm_us"] for r in runs),
                                  "release_after_start_us": statistics.median(r["release_after_start_us"] for r in runs),
                                  "release_last_after_start_us":
                                      statistics.median(r["release_last_after_start_us"] for r in runs),
                                  "start_after_gate_us": statistics.median(r["start_after_gate_us"] for r in runs),
                                  "samples_us": [round(r["gemm_us"], 2) for r in runs]})
            c.rf.add({"bench": "gemm_release", "m": m, "n": n, "k": kk, "dtype": "bfloat16",
                      "alone_us": alone, "alone_samples_us": [round(t, 2) for t in alone_runs],
                      "gemm_kernels": _kernels(gemm), "cells": cells_out})
            common.log(f"gemm_release {m}x{n}x{kk}: alone {alone:.1f} us; " + ", ".join(
                f"k{co['spin_kernels']} f{co['release_fraction']} x{co['gemm_us'] / alone:.2f}" for co in cells_out))

        common.guarded(c.rf, f"gemm_release {shape}", measure)
        torch.cuda.empty_cache()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--smoke", action="store_true", help="one shape, one spin count")
    ap.add_argument("--budget-s", type=float, default=40.0, help="no new shape or cell starts after this many seconds")
    ap.add_argument("--reps", type=int, default=15, help="repetitions per cell (median)")
    ap.add_argument("--dry-run", action="store_true", help="parse the arguments and print the plan; no GPU")
    ns = ap.parse_args(argv)
    if ns.budget_s <= 0:
        print(f"error: --budget-s: {ns.budget_s} (expected a positive number of seconds)")
        return 2
    if ns.reps < 1:
        print(f"error: --reps: {ns.reps} (expected a positive integer)")
        return 2
    cells = plan(ns.smoke)
    if ns.dry_run:
        print(f"{len(cells)} cells over {len({s for s, _, _ in cells})} GEMM shapes, spins {sorted({k for _, k, _ in cells})}, "
              f"{ns.reps} reps; budget {ns.budget_s} s; out {ns.out}")
        return 0
    os.environ.setdefault("CUDA_DEVICE_MAX_CONNECTIONS", "32")
    os.makedirs(ns.out, exist_ok=True)
    c = Ctx(ns.out, ns.smoke, ns.budget_s, ns.reps)
    common.warm_gpu(1.0)
    t0 = time.time()
    run(c, cells)
    common.log(f"gemm_release: {len(c.rf.doc['records'])} records, {time.time() - t0:.1f} s")
    c.rf.close("truncated" if c.rf.doc.get("truncated") else "complete")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
