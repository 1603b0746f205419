"""Host cost the PyTorch profiler adds per recorded event, measured on tiny tensors (host-bound).

    python3 -m sim.calibrate.gpu.profiler_overhead --out DIR

A trace from torch.profiler is slower on the host than the program it records: every CPU op
and every CUDA runtime/driver call it records costs time. Replaying a trace in predict mode
prices the host from the profile (measured without the profiler), so it must add this back to
compare with the trace's own step time.

For each op (a set of eager ops, kernel-less view ops and a small nn.Module forward) and each
profiler configuration (record_shapes off/on, with_stack), the record holds the host time per
call without the profiler and under it (perf_counter over back-to-back calls, median of
repeats) and the number of events of each category the profiler recorded per call (from the
exported Chrome trace). The fit regresses the added time on the event counts.

Writes DIR/profiler_overhead.json = {"meta", "group": "profiler_overhead", "records"}.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections import Counter
from typing import Any

from . import common
from .trace_utils import export_trace

CONFIGS = {
    "plain": {"record_shapes": False, "with_stack": False},
    "shapes": {"record_shapes": True, "with_stack": False},
    "stack": {"record_shapes": True, "with_stack": True},
}


def _timed(fn: Any, n: int) -> float:
    return common.timed_loop(fn, n)[0]


def _profiled(fn: Any, n: int, cfg: dict[str, bool]) -> tuple[float, dict[str, float]]:
    """Host µs per call of fn under the profiler, and events per call by category."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], **cfg) as prof:
        fn()  # warm the profiler's per-op paths
        torch.cuda.synchronize()
        us = _timed(fn, n)
    doc = export_trace(prof)
    counts = Counter(e.get("cat", "") for e in doc.get("traceEvents", []) if e.get("ph") == "X")
    per_call = {cat: c / (n + 1) for cat, c in counts.items()
                if cat in ("cpu_op", "cuda_runtime", "cuda_driver", "python_function", "kernel")}
    return us, per_call


def run(out_dir: str, traces: bool = True) -> dict[str, Any]:
    import torch
    import torch.nn.functional as F

    dev = "cuda"
    bf = torch.bfloat16
    x = torch.randn(64, 64, device=dev, dtype=bf)
    w = torch.randn(64, 64, device=dev, dtype=bf)
    b = torch.randn(64, device=dev, dtype=bf)

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln = torch.nn.LayerNorm(64, device=dev, dtype=bf)
            self.fc1 = torch.nn.Linear(64, 256, device=dev, dtype=bf)
            self.fc2 = torch.nn.Linear(256, 64, device=dev, dtype=bf)

        def forward(self, t: Any) -> Any:
            h = self.ln(t).view(64, 64)
            return t + self.fc2(F.gelu(self.fc1(h)))

    block = Block()
    ops = {
        "addmm_linear": lambda: F.linear(x, w, b),
        "add": lambda: x + b,
        "gelu": lambda: F.gelu(x),
        "layer_norm": lambda: F.layer_norm(x, (64,), b, b),
        "view": lambda: x.view(16, 256),
        "t": lambda: x.t(),
        "unbind": lambda: x.unbind(0),
        "block_forward": lambda: block(x),
    }
    records: list[dict[str, Any]] = []
    common.warm_gpu(0.5)
    with torch.no_grad():
        for name, fn in ops.items():
            n = 100 if name in ("unbind", "block_forward") else 300
            fn()
            plain = [_timed(fn, n) for _ in range(5)]
            for cfg_name, cfg in CONFIGS.items():
                prof_us, events = [], {}
                for _ in range(3):
                    us, events = _profiled(fn, n, cfg)
                    prof_us.append(us)
                rec = {"bench": "profiler_overhead", "op": name, "config": cfg_name, **cfg, "n_calls": n,
                       "plain_us_per_call": statistics.median(plain), "plain_samples_us": plain,
                       "profiled_us_per_call": statistics.median(prof_us), "profiled_samples_us": prof_us,
                       "events_per_call": events}
                records.append(rec)
                common.log(f"{name} [{cfg_name}]: {rec['plain_us_per_call']:.1f} -> {rec['profiled_us_per_call']:.1f} us,"
                           f" events {events}")
    if traces:
        records += heldout_traces(os.path.join(out_dir, "traces"))
    return common.write_group(out_dir, "profiler_overhead", records, "sim.calibrate.gpu.profiler_overhead")


def heldout_traces(trace_dir: str) -> list[dict[str, Any]]:
    """Profiled traces of workloads at shapes the trace fixtures do not use (a held-out set for
    replay's predict mode), each with the same step's time without the profiler."""
    import torch

    from .validate import write_trace
    from .workloads import decoder_class, transformer_block_class

    os.makedirs(trace_dir, exist_ok=True)
    out: list[dict[str, Any]] = []

    def unprofiled(step: Any, zero: Any, n: int = 20) -> list[float]:
        times = []
        for _ in range(n):
            zero()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            step()
            torch.cuda.synchronize()
            times.append((time.perf_counter() - t0) * 1e6)
        return times

    def record(name: str, step: Any, zero: Any, info: dict[str, Any]) -> None:
        try:
            for _ in range(3):
                zero()
                step()
            plain = unprofiled(step, zero)
            r = write_trace(os.path.join(trace_dir, f"{name}.json.gz"), step, zero)
            r.update({"bench": "heldout_trace", "name": name, **info,
                      "unprofiled_step_us": statistics.median(plain), "unprofiled_samples_us": plain})
            out.append(r)
            common.log(f"trace {name}: unprofiled {r['unprofiled_step_us']:.1f} us")
        except Exception as exc:  # noqa: BLE001
            out.append({"bench": "heldout_trace", "name": name, "error": repr(exc)[:300]})
            common.log(f"trace {name} failed: {exc!r}")

    noop = lambda: None  # noqa: E731
    Dec = decoder_class()
    dec = Dec().cuda().to(torch.bfloat16).eval()
    for B, L in ((1, 128), (32, 1024)):
        caches = dec.alloc_cache(B, 2048)
        xd = torch.randn(B, 1, 2048, device="cuda", dtype=torch.bfloat16)
        pos = torch.tensor([L - 1], device="cuda", dtype=torch.long)

        def dstep(xd: Any = xd, caches: Any = caches, pos: Any = pos, L: int = L) -> Any:
            with torch.no_grad():
                return dec(xd, caches, pos, L)
        record(f"decode_eager_b{B}_l{L}", dstep, noop, {"workload": "decode", "variant": "eager", "batch": B,
                                                       "kv_len": L})
        caches = None
        torch.cuda.empty_cache()
    Block = transformer_block_class()
    blk = Block().cuda().to(torch.bfloat16)
    for B, S in ((1, 256), (2, 2048)):
        xt = torch.randn(B, S, 2048, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        gy = torch.randn_like(xt)

        def zero(xt: Any = xt) -> None:
            blk.zero_grad(set_to_none=True)
            xt.grad = None

        def tstep(xt: Any = xt, gy: Any = gy) -> None:
            blk(xt).backward(gy)
        record(f"transformer_eager_b{B}_s{S}", tstep, zero, {"workload": "transformer_block", "variant": "eager",
                                                             "batch": B, "seq": S})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="directory for profiler_overhead.json")
    ap.add_argument("--no-traces", action="store_true",
                    help="skip the held-out validation traces (DIR/traces/*.json.gz); calibration needs none")
    ns = ap.parse_args()
    run(ns.out, traces=not ns.no_traces)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
