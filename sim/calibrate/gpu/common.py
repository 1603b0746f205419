"""Shared pieces of the GPU harness: provenance (meta), timing, budgets, result files.

torch is imported inside functions only; this module imports nothing from ``sim``.
Timing follows triton.testing.do_bench: warm up, estimate one run, size repetitions
from the estimate, optionally flush L2 (write a 256 MB buffer) before every repetition,
time each repetition with CUDA events and report the median.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tarfile
import time
import traceback
from collections.abc import Callable
from typing import Any

MAX_SAMPLES = 25
FLUSH_BYTES = 256 * 1024 * 1024

# ----------------------------------------------------------------------------- meta


def _nvidia_smi_query() -> dict[str, Any]:
    fields = [
        "name", "driver_version", "clocks.sm", "clocks.mem", "clocks.max.sm", "clocks.max.mem",
        "power.limit", "power.draw", "temperature.gpu", "pstate", "memory.total", "ecc.mode.current",
    ]
    try:
        out = subprocess.run(
            ["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=20,
        ).stdout.strip().splitlines()
    except Exception as exc:  # noqa: BLE001 - provenance is best effort
        return {"error": repr(exc)}
    if not out:
        return {"error": "nvidia-smi returned nothing"}
    vals = [v.strip() for v in out[0].split(",")]
    res: dict[str, Any] = {}
    for k, v in zip(fields, vals, strict=False):
        key = k.replace(".", "_")
        try:
            res[key] = float(v) if key not in ("name", "driver_version", "pstate", "ecc_mode_current") else v
        except ValueError:
            res[key] = v
    # units: clocks in MHz, power in W, temperature in C, memory.total in MiB
    return {
        "name": res.get("name"),
        "driver": res.get("driver_version"),
        "sm_clock_mhz": res.get("clocks_sm"),
        "mem_clock_mhz": res.get("clocks_mem"),
        "sm_clock_max_mhz": res.get("clocks_max_sm"),
        "mem_clock_max_mhz": res.get("clocks_max_mem"),
        "power_limit_w": res.get("power_limit"),
        "power_draw_w": res.get("power_draw"),
        "temperature_c": res.get("temperature_gpu"),
        "pstate": res.get("pstate"),
        "memory_total_mib": res.get("memory_total"),
        "ecc_mode": res.get("ecc_mode_current"),
    }


def collect_meta(extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Provenance for a result file: device, clocks, software versions, date, command."""
    import torch

    meta: dict[str, Any] = {
        "date_utc": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "hostname": socket.gethostname(),
        "command": os.environ.get("KS_COMMAND") or " ".join([sys.executable, *sys.argv]),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda_runtime": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
    }
    try:
        import triton

        meta["triton"] = triton.__version__
    except Exception as exc:  # noqa: BLE001
        meta["triton"] = f"unavailable: {exc!r}"
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        meta.update({
            "gpu_name": p.name,
            "sm_count": p.multi_processor_count,
            "l2_bytes": getattr(p, "L2_cache_size", None),
            "memory_bytes": p.total_memory,
            "compute_capability": f"{p.major}.{p.minor}",
            "regs_per_sm": getattr(p, "regs_per_multiprocessor", None),
            "max_threads_per_sm": getattr(p, "max_threads_per_multi_processor", None),
            "shared_mem_per_sm_bytes": getattr(p, "shared_memory_per_multiprocessor", None),
            "shared_mem_per_block_optin_bytes": getattr(p, "shared_memory_per_block_optin", None),
            "warp_size": getattr(p, "warp_size", None),
        })
    meta["nvidia_smi"] = _nvidia_smi_query()
    if extra:
        meta.update(extra)
    return meta


# ----------------------------------------------------------------------------- budget


class Budget:
    """Wall-clock budget: a hard deadline for the whole run and soft ones per group."""

    def __init__(self, deadline: float | None) -> None:
        self.deadline = deadline if deadline is not None else float("inf")
        self.group_deadline = self.deadline

    def left(self) -> float:
        return min(self.deadline, self.group_deadline) - time.time()

    def start_group(self, seconds: float) -> None:
        self.group_deadline = min(self.deadline, time.time() + seconds)

    def expired(self, reserve_s: float = 0.0) -> bool:
        return self.left() <= reserve_s


# ----------------------------------------------------------------------------- output


def trim_samples(samples: list[float], k: int = MAX_SAMPLES) -> list[float]:
    """At most k samples, evenly spaced in time order, rounded to 0.001 us."""
    if len(samples) > k:
        step = (len(samples) - 1) / (k - 1)
        samples = [samples[round(i * step)] for i in range(k)]
    return [round(s, 3) for s in samples]


def _round(obj: Any) -> Any:
    if isinstance(obj, float):
        return float(f"{obj:.6g}")
    if isinstance(obj, dict):
        return {k: _round(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_round(v) for v in obj]
    return obj


class ResultFile:
    """One JSON file {"meta", "group", "status", "records", "errors"}, rewritten atomically
    after every record so an interrupted run still leaves valid JSON."""

    def __init__(self, path: str, group: str, meta: dict[str, Any], on_flush: Callable[[], None] | None = None,
                 flush_every_s: float = 20.0) -> None:
        self.path = path
        self.doc: dict[str, Any] = {"meta": meta, "group": group, "status": "running", "records": [], "errors": []}
        self.on_flush = on_flush
        self.flush_every_s = flush_every_s
        self._last_pack = time.time()
        self.t0 = time.time()
        self.write()

    def add(self, rec: dict[str, Any]) -> None:
        self.doc["records"].append(_round(rec))
        self.write()

    def error(self, where: str, exc: BaseException) -> None:
        tb = traceback.format_exc(limit=6)
        self.doc["errors"].append({"where": where, "error": repr(exc)[:500], "traceback": tb[-2000:]})
        print(f"[{self.doc['group']}] ERROR in {where}: {exc!r}", flush=True)
        self.write()

    def write(self) -> None:
        self.doc["wall_s"] = round(time.time() - self.t0, 2)
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.doc, f, separators=(",", ":"))
        os.replace(tmp, self.path)
        if self.on_flush and time.time() - self._last_pack > self.flush_every_s:
            self._last_pack = time.time()
            self.on_flush()

    def close(self, status: str = "complete") -> None:
        self.doc["status"] = status
        self.doc["nvidia_smi_end"] = _nvidia_smi_query()
        self.write()
        if self.on_flush:
            self.on_flush()


def guarded(rf: ResultFile, where: str, fn: Callable[[], Any]) -> Any:
    """Run one measurement; an exception is recorded in `rf` (the sweep goes on) and the device is
    brought back to a usable state (synchronized, cache emptied). Returns fn's result or None."""
    import torch

    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - recorded; the next measurement still runs
        rf.error(where, exc)
        try:
            torch.cuda.synchronize()
        except Exception:  # noqa: BLE001 - a broken context: empty_cache below is all we can do
            pass
        torch.cuda.empty_cache()
        return None


def budget_error(budget_s: float) -> str | None:
    """The `error:` line for a --budget-s that is not a positive, finite number of seconds (nan, inf, 0, < 0);
    None for a usable one. A harness prints it to stderr and exits 2 before it measures or writes anything."""
    import math

    if math.isfinite(budget_s) and budget_s > 0:
        return None
    return f"error: --budget-s: {budget_s} (expected a positive, finite number of seconds)"


class BudgetedAttempts:
    """A result file and a wall-clock deadline shared by one harness run: each measurement runs
    guarded (see `guarded`) until the deadline passes; after it none starts, and the file is
    marked ``truncated`` so a short run is never mistaken for a complete one."""

    def __init__(self, rf: ResultFile, budget_s: float) -> None:
        self.rf = rf
        self.deadline = time.time() + budget_s

    def out_of_time(self) -> bool:
        if time.time() > self.deadline:
            self.rf.doc["truncated"] = True
            return True
        return False

    def attempt(self, where: str, fn: Callable[[], Any]) -> Any:
        """fn's result, or None when the budget is spent or fn raised (recorded in the file)."""
        if self.out_of_time():
            return None
        return guarded(self.rf, where, fn)


def pack_dir(src_dir: str, archive: str) -> None:
    """tar.gz src_dir into archive (atomically); used to bring results back from $OUT."""
    tmp = archive + ".tmp"
    with tarfile.open(tmp, "w:gz") as tf:
        tf.add(src_dir, arcname=os.path.basename(src_dir.rstrip("/")))
    os.replace(tmp, archive)


# ----------------------------------------------------------------------------- timing


def _stats(samples_us: list[float]) -> dict[str, Any]:
    s = sorted(samples_us)
    n = len(s)
    return {
        "time_us": statistics.median(s),
        "min_us": s[0],
        "p10_us": s[int(0.1 * (n - 1))],
        "p90_us": s[int(0.9 * (n - 1))],
        "mean_us": sum(s) / n,
        "n_reps": n,
        "samples_us": trim_samples(samples_us),
    }


_FLUSH_BUF = None


def flush_l2() -> None:
    """Write a 256 MB buffer (4x the H200's L2) so the next kernel starts with a cold L2."""
    global _FLUSH_BUF
    import torch

    if _FLUSH_BUF is None:
        _FLUSH_BUF = torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
    _FLUSH_BUF.zero_()


def bench(fn: Callable[[int], Any], *, flush: bool = True, warmup_ms: float = 25.0, rep_ms: float = 100.0,
          min_reps: int = 10, max_reps: int = 200, max_warmup: int = 50) -> dict[str, Any]:
    """do_bench-style timing of fn(i) (i = repetition index, for rotating input sets).

    Every repetition is bracketed by its own pair of CUDA events; with flush=True an L2
    flush runs before each repetition (outside the events). Returns median and stats in us.
    """
    import torch

    fn(0)
    torch.cuda.synchronize()
    # estimate
    est_n = 3
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for i in range(est_n):
        if flush:
            flush_l2()
        fn(i)
    e.record()
    torch.cuda.synchronize()
    est_ms = max(s.elapsed_time(e) / est_n, 1e-4)
    n_warm = max(1, min(max_warmup, int(warmup_ms / est_ms)))
    n_rep = max(min_reps, min(max_reps, int(rep_ms / est_ms)))
    for i in range(n_warm):
        fn(i)
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n_rep)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n_rep)]
    for i in range(n_rep):
        if flush:
            flush_l2()
        starts[i].record()
        fn(i)
        ends[i].record()
    torch.cuda.synchronize()
    samples = [starts[i].elapsed_time(ends[i]) * 1e3 for i in range(n_rep)]
    res = _stats(samples)
    res["flush_l2"] = flush
    return res


def bench_graph(fn: Callable[[], Any], n_inner: int = 100, n_replays: int = 20) -> dict[str, Any]:
    """Capture fn n_inner times back-to-back in one CUDA graph; time replays with events.

    Returns the device-side time per fn call (replay time / n_inner), median over replays,
    plus the per-replay totals.
    """
    import torch

    st = torch.cuda.Stream()
    st.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(st):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(st)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(n_inner):
            fn()
    torch.cuda.synchronize()
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n_replays)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n_replays)]
    for i in range(n_replays):
        starts[i].record()
        g.replay()
        ends[i].record()
    torch.cuda.synchronize()
    per_replay = [starts[i].elapsed_time(ends[i]) * 1e3 for i in range(n_replays)]
    per_call = [t / n_inner for t in per_replay]
    res = _stats(per_call)
    res["n_inner"] = n_inner
    res["replay_time_us"] = statistics.median(per_replay)
    del g
    return res


def timed_loop(fn: Callable[[], Any], n: int) -> tuple[float, float]:
    """(enqueue, drain) µs per call of n back-to-back calls of fn: perf_counter to the return of
    the n-th call, and to the end of the device's work (torch.cuda.synchronize)."""
    import torch

    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    return (t1 - t0) * 1e6 / n, (t2 - t0) * 1e6 / n


def host_loop(fn: Callable[[], Any], n: int = 1000, repeats: int = 5) -> dict[str, Any]:
    """CPU wall time per call of fn over n back-to-back calls without synchronizing.

    enqueue_us: perf_counter from the first call to the return of the n-th (host cost);
    drain_us: same but until the device has finished (torch.cuda.synchronize), per call.
    Median over `repeats` loops, after one warm-up loop.
    """
    timed_loop(fn, n)
    enq, drain = zip(*[timed_loop(fn, n) for _ in range(repeats)], strict=True)
    return {
        "enqueue_us_per_call": statistics.median(enq),
        "drain_us_per_call": statistics.median(drain),
        "enqueue_samples_us": trim_samples(list(enq)),
        "drain_samples_us": trim_samples(list(drain)),
        "n_calls": n,
        "repeats": repeats,
    }


def warm_gpu(seconds: float = 1.5) -> float:
    """Run bf16 matrix products for `seconds` so the SM clock leaves its idle state before
    timing (the clocks are never changed, only exercised). Returns the seconds spent."""
    import torch

    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    t0 = time.time()
    while time.time() - t0 < seconds:
        for _ in range(20):
            torch.mm(a, a)
        torch.cuda.synchronize()
    return time.time() - t0


def occupancy_estimate(n_regs: int | None, num_warps: int) -> dict[str, Any]:
    """An H200 SM's resident blocks for a kernel of n_regs registers per thread and num_warps warps per block
    (64K registers allocated per warp in units of 256, at most 64 warps and 32 blocks per SM): the record fields
    blocks_per_sm_est, warps_per_sm_est, occupancy_est; {} when the register count is unknown."""
    if not n_regs:
        return {}
    regs_per_warp = -(-n_regs * 32 // 256) * 256
    blocks = max(0, min(65536 // (regs_per_warp * num_warps), 64 // num_warps, 32))
    return {"blocks_per_sm_est": blocks, "warps_per_sm_est": blocks * num_warps, "occupancy_est": blocks * num_warps / 64}


def triton_kernel_info(ck: Any) -> dict[str, Any]:
    """Registers, spills, shared memory and warps of a triton CompiledKernel (best effort)."""
    info: dict[str, Any] = {}
    if ck is None:
        return {"kernel_info_error": "launch returned None"}
    try:
        if getattr(ck, "n_regs", None) is None and hasattr(ck, "_init_handles"):
            ck._init_handles()
    except Exception as exc:  # noqa: BLE001
        info["kernel_info_error"] = repr(exc)[:200]
    for attr in ("n_regs", "n_spills", "n_max_threads"):
        v = getattr(ck, attr, None)
        if v is not None:
            info[attr] = int(v)
    md = getattr(ck, "metadata", None)
    if md is not None:
        for attr in ("shared", "num_warps", "num_stages", "num_ctas", "name"):
            v = getattr(md, attr, None)
            if v is not None:
                info["shared_bytes" if attr == "shared" else ("kernel_name" if attr == "name" else attr)] = v
    return info


def random_like_shape(shape: tuple[int, ...], dtype: Any, device: str = "cuda", scale: float = 1.0) -> Any:
    import torch

    if dtype in (torch.uint8, torch.int8, torch.int32, torch.int64, torch.bool):
        return torch.randint(0, 2, shape, device=device).to(dtype)
    t = torch.randn(shape, device=device, dtype=torch.float32 if dtype == torch.float64 else dtype)
    if scale != 1.0:
        t.mul_(scale)
    return t.to(dtype)


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def write_group(out_dir: str, group: str, records: list[dict[str, Any]], module: str) -> dict[str, Any]:
    """Write DIR/<group>.json = {"meta", "group", "mode", "status", "records"} for a one-shot group."""
    import json
    import os

    command = os.environ.get("KS_COMMAND", f"python3 -m {module}")
    doc = {"meta": collect_meta({"command": command}), "group": group, "mode": "full", "status": "complete",
           "records": records}
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, f"{group}.json"), "w") as fh:
        json.dump(doc, fh, indent=1)
    return doc
