"""NCCL communication on the visible GPUs of one host: collectives, contention, DDP overlap.

    python3 -m sim.calibrate.gpu.comm --out DIR [--quick] [--world-sizes 1,2,4,8] [--budget-s S]
        [--stages check,contention_grid,ddp_grid] [--dry-run]

Launches one process per GPU itself (torch.multiprocessing, NCCL backend, rendezvous on
127.0.0.1 only), once for every power-of-two world size up to the number of visible GPUs
(1, 2, 4, 8; one rank still runs NCCL's path), and measures on each:

- `bench: collective`: all-reduce, all-gather, reduce-scatter, all-to-all, broadcast and
  send/recv (ring neighbour exchange, as nccl-tests' sendrecv_perf; not on one rank) over
  message sizes 1 KiB .. 1 GiB (x4 steps; x16 with --quick), fp32; all-reduce and broadcast
  in place, the others out of place. The size S is nccl-tests' column: the whole buffer (all-gather's output,
  reduce-scatter's input, all-to-all's per-rank buffer). Each sample times `calls_per_sample`
  back-to-back calls between two CUDA events (as nccl-tests averages iterations, so host
  issue overlaps device work); per rank the median sample; `time_us` is the mean of the
  ranks' medians (nccl-tests' default `-a 1`), `time_us_max_rank` their maximum.
  algbw = S / time, busbw = algbw x nccl-tests' factor (2(n-1)/n all-reduce; (n-1)/n
  all-gather, reduce-scatter, all-to-all; 1 broadcast, send/recv).
- `bench: channels`: all-reduce and all-gather of one large size on a group whose NCCL
  config pins min_ctas = max_ctas = c (c = 1 .. 32): what one channel (CTA) moves.
- `bench: contention`: a GEMM-heavy (bf16 mm) and a bandwidth-heavy (copy) load on one
  stream while all-reduces run on another: each alone, then both at once; slowdown of each
  and how long the two really overlapped.
- `bench: ddp_step`: an MLP (Linear H->F, GELU, Linear F->H, bf16) forward+backward under
  DistributedDataParallel (bucketed all-reduce, eager) per token count: step time, the same
  step under `no_sync()` (no communication), exposed communication = the difference, and the
  all-reduce of all gradient bytes alone.
- `bench: contention_grid` (stage contention_grid, not in the default stages): loads (bf16 GEMMs
  from one wave to many waves, DDP's weight-gradient shape, copies of 64 MiB and 1 GiB) x
  all-reduce sizes (4, 32, 256 MiB) on two streams, the load on every rank and (two cells) on
  rank 0 only; per cell the slowdowns per rank and, for the first concurrent repetition, every
  call's end on both streams (how the two kernels interleave).
- `bench: ddp_variant` (stage ddp_grid): DDP workloads that differ by width, depth (blocks of
  Linear H->F, GELU, Linear F->H), bucket cap and gradient_as_bucket_view, per token count the
  step with and without communication, and rank 0's kernel timeline of one profiled step
  (torch.profiler: name, stream, start, duration).
- `bench: ddp_ranks` (stage ddp_ranks): the ddp_grid workloads with every rank's clocks: per step
  (DDP as shipped, DDP with a comm hook that timestamps each bucket, no_sync) the host clock
  (perf_counter_ns: one clock for both processes of the host) at the barrier's return, the call and
  its return, the device time, and per bucket the hook's host entry / return and the device time its
  last gradient was in; one profiled step per rank (CPU and CUDA, the profiler's absolute times).
- `bench: sm_share` (stage sm_share): calibration-split bf16 GEMMs started while an occupier is
  already resident (as a DDP backward GEMM starts beside a bucket's all-reduce): alone, beside k
  one-thread spin kernels (SMs held, no memory traffic), beside all-reduces of groups pinned to c
  NCCL channels and of the default group, beside a 1 GiB device copy; per cell every rank's GEMM
  time per call and whether the GEMM's window lay inside the occupier's; the launch configuration
  (grid, block, registers, shared memory) of each GEMM, spin, copy and all-reduce kernel
  (`bench: sm_share_meta`).
- `bench: nccl_init`: NCCL's own INFO log of rank 0 (INIT, GRAPH, ENV): channel counts, rings,
  trees, transports (NVLink / P2P / SHM), one per world size.

Writes DIR/comm.json = {"meta", "group": "comm", "mode", "status", "records", "errors"}
after every world size (status "running" until the end; "partial" when a world size
failed or the budget ran out). NVLink multicast stays off in every process it starts
(NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1, NVSHMEM_DISABLE_NVLS=1): NCCL's
NVLS all-reduce is therefore not measured. Never changes GPU settings: it only reads them.
torch is imported inside functions only; from ``sim`` it imports only nccl-tests' bus-bandwidth factor
(sim.busbw.busbw_factor, the one the model uses; that module imports nothing).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import time
import traceback
from typing import Any

from sim.busbw import busbw_factor

from . import common

GROUP = "comm"
MODULE = "sim.calibrate.gpu.comm"
MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
STAGES = ("check", "host", "collectives", "channels", "contention", "ddp", "contention_grid", "ddp_grid",
          "ddp_ranks", "sm_share")
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "send_recv")
ENV_PREFIXES = ("NCCL_", "TORCH_NCCL_", "TORCH_SYMM_MEM", "NVSHMEM_", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_MAX",
                "MASTER_ADDR", "OMP_NUM_THREADS")
KIB = 1024
GIB = 1 << 30


def multicast_off() -> None:
    """Keep NVLink multicast off in this process and every process it starts (inherited env)."""
    os.environ.update(MULTICAST_OFF)


def message_sizes(quick: bool) -> list[int]:
    """1 KiB .. 1 GiB in x4 steps (x16 with quick)."""
    step = 16 if quick else 4
    out, s = [], KIB
    while s <= GIB:
        out.append(s)
        s *= step
    return out


def world_sizes_for(n_gpus: int) -> list[int]:
    out, w = [], 1
    while w <= n_gpus:
        out.append(w)
        w *= 2
    return out


def _env_snapshot() -> dict[str, str]:
    return {k: v for k, v in sorted(os.environ.items()) if k.startswith(ENV_PREFIXES)}


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run_text(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=20).stdout.strip()
    except Exception as exc:  # noqa: BLE001 - provenance is best effort
        return f"unavailable: {exc!r}"


# ----------------------------------------------------------------------------- worker (one per rank)


class _Ctx:
    """What every stage of a rank needs: torch, dist, rank, world, config, a deadline and the
    rank-0 result file (rewritten after every stage so a killed run leaves what it had)."""

    def __init__(self, rank: int, world: int, cfg: dict[str, Any], result_path: str) -> None:
        import torch
        import torch.distributed as dist

        self.torch, self.dist = torch, dist
        self.rank, self.world, self.cfg, self.result_path = rank, world, cfg, result_path
        self.records: list[dict[str, Any]] = []
        self.errors: list[dict[str, Any]] = []
        self.share_stream: Any = None  # stage sm_share's GEMM stream

    def agree_max(self, value: float) -> float:
        """The largest `value` over all ranks (so every rank makes the same decision)."""
        t = self.torch.tensor([float(value)], device="cuda", dtype=self.torch.float64)
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MAX)
        return float(t.item())

    def expired(self) -> bool:
        return self.agree_max(1.0 if time.time() > self.cfg["deadline"] else 0.0) > 0

    def gather(self, value: Any) -> list[Any]:
        out: list[Any] = [None] * self.world
        self.dist.all_gather_object(out, value)
        return out

    def add(self, rec: dict[str, Any]) -> None:
        if self.rank == 0:
            self.records.append(rec)

    def error(self, where: str, exc: BaseException) -> None:
        common.log(f"[rank {self.rank} world {self.world}] ERROR in {where}: {exc!r}")
        if self.rank == 0:
            self.errors.append({"where": f"world {self.world}: {where}", "error": repr(exc)[:500],
                                "traceback": traceback.format_exc(limit=6)[-2000:]})

    def flush(self) -> None:
        if self.rank != 0:
            return
        tmp = self.result_path + ".tmp"
        with open(tmp, "w") as fh:
            json.dump({"world_size": self.world, "records": self.records, "errors": self.errors}, fh)
        os.replace(tmp, self.result_path)


def _time_calls(ctx: _Ctx, op: Any, *, target_ms: float, n_samples: int, max_calls: int = 2000) -> dict[str, Any]:
    """Median per-call time of `op` (a collective: every rank calls it the same number of times).

    One call compiles/warms; 3 calls estimate; k = target_ms / estimate calls (the same k on every
    rank) per sample; k warm-up calls; n_samples samples of k back-to-back calls between CUDA events.
    """
    torch = ctx.torch
    op()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(3):
        op()
    e.record()
    torch.cuda.synchronize()
    est_ms = ctx.agree_max(max(s.elapsed_time(e) / 3, 1e-4))
    k = max(1, min(max_calls, int(target_ms / est_ms)))
    for _ in range(k):
        op()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n_samples)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n_samples)]
    for i in range(n_samples):
        starts[i].record()
        for _ in range(k):
            op()
        ends[i].record()
    torch.cuda.synchronize()
    samples = [starts[i].elapsed_time(ends[i]) * 1e3 / k for i in range(n_samples)]
    srt = sorted(samples)
    n = len(srt)
    return {"median_us": statistics.median(srt), "min_us": srt[0], "p10_us": srt[int(0.1 * (n - 1))],
            "p90_us": srt[int(0.9 * (n - 1))], "calls_per_sample": k, "n_samples": n,
            "samples_us": common.trim_samples(samples)}


def _collective_op(ctx: _Ctx, coll: str, size: int, group: Any = None) -> Any:
    """(op, tensors) for one nccl-tests-sized call of `coll` (fp32, size bytes in S's sense)."""
    torch, dist, n, rank = ctx.torch, ctx.dist, ctx.world, ctx.rank
    count = size // 4
    if coll == "all_reduce":
        x = torch.full((count,), float(rank + 1), device="cuda")
        return lambda: dist.all_reduce(x, group=group)
    if coll == "all_gather":
        out = torch.empty(count, device="cuda")
        inp = torch.full((count // n,), float(rank), device="cuda")
        return lambda: dist.all_gather_into_tensor(out, inp, group=group)
    if coll == "reduce_scatter":
        inp = torch.full((count,), float(rank), device="cuda")
        out = torch.empty(count // n, device="cuda")
        return lambda: dist.reduce_scatter_tensor(out, inp, group=group)
    if coll == "all_to_all":
        inp = torch.full((count,), float(rank), device="cuda")
        out = torch.empty(count, device="cuda")
        return lambda: dist.all_to_all_single(out, inp, group=group)
    if coll == "broadcast":
        x = torch.full((count,), float(rank), device="cuda")
        return lambda: dist.broadcast(x, src=0, group=group)
    if coll == "send_recv":
        sbuf = torch.full((count,), float(rank), device="cuda")
        rbuf = torch.empty(count, device="cuda")
        nxt, prv = (rank + 1) % n, (rank - 1 + n) % n

        def op() -> None:
            reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, sbuf, nxt, group=group),
                                           dist.P2POp(dist.irecv, rbuf, prv, group=group)])
            for r in reqs:
                r.wait()
        return op
    raise ValueError(coll)


def _stage_check(ctx: _Ctx) -> None:
    torch, dist = ctx.torch, ctx.dist
    x = torch.ones(1024, device="cuda")
    dist.all_reduce(x)
    got = float(x[0].item())
    ok = got == float(ctx.world)
    ctx.add({"bench": "check", "world_size": ctx.world, "all_reduce_ones": got, "ok": ok})
    if not ok:
        raise RuntimeError(f"all-reduce of ones gave {got}, expected {ctx.world}")


def _stage_collectives(ctx: _Ctx) -> None:
    cfg = ctx.cfg
    for coll in COLLECTIVES:
        for size in cfg["sizes"]:
            base = {"bench": "collective", "collective": coll, "world_size": ctx.world, "nodes": 1, "bytes": size,
                    "dtype": "float32", "in_place": coll in ("all_reduce", "broadcast")}
            if coll == "send_recv" and ctx.world < 2:
                ctx.add({**base, "skipped": "send/recv needs 2 ranks"})
                continue
            if ctx.expired():
                ctx.add({**base, "skipped": "budget"})
                continue
            try:
                op = _collective_op(ctx, coll, size)
                target = cfg["target_ms"] if size < (64 << 20) else cfg["target_ms_large"]
                st = _time_calls(ctx, op, target_ms=target, n_samples=cfg["n_samples"])
                meds = ctx.gather(st["median_us"])
                t_avg = sum(meds) / len(meds)
                f = busbw_factor(coll, ctx.world)
                algbw = size / (t_avg * 1e-6) / 1e9
                rec = {**base, "time_us": t_avg, "time_us_max_rank": max(meds), "time_us_ranks": meds,
                       "algbw_gbps": algbw, "busbw_gbps": algbw * f, "busbw_factor": f,
                       "rank0": {k: v for k, v in st.items() if k != "median_us"}}
                ctx.add(rec)
                if ctx.rank == 0:
                    common.log(f"world {ctx.world} {coll} {size} B: {t_avg:.1f} us, busbw {algbw * f:.1f} GB/s")
                del op
            except Exception as exc:  # noqa: BLE001 - recorded; a symmetric failure keeps ranks in step
                ctx.error(f"{coll} {size} B", exc)
        ctx.torch.cuda.empty_cache()
        ctx.flush()


def _stage_channels(ctx: _Ctx) -> None:
    """Collectives on groups whose NCCL config pins the CTA (channel) count."""
    dist, cfg = ctx.dist, ctx.cfg
    size = cfg["channel_bytes"]
    for c in cfg["channel_counts"]:
        if ctx.expired():
            ctx.add({"bench": "channels", "world_size": ctx.world, "ctas": c, "skipped": "budget"})
            continue
        try:
            opts = dist.ProcessGroupNCCL.Options()
            opts.config.min_ctas = c
            opts.config.max_ctas = c
            g = dist.new_group(ranks=list(range(ctx.world)), backend="nccl", pg_options=opts)
            for coll in ("all_reduce", "all_gather"):
                op = _collective_op(ctx, coll, size, group=g)
                st = _time_calls(ctx, op, target_ms=cfg["target_ms_large"], n_samples=max(5, cfg["n_samples"] // 2))
                meds = ctx.gather(st["median_us"])
                t_avg = sum(meds) / len(meds)
                f = busbw_factor(coll, ctx.world)
                algbw = size / (t_avg * 1e-6) / 1e9
                ctx.add({"bench": "channels", "collective": coll, "world_size": ctx.world, "ctas": c, "bytes": size,
                         "dtype": "float32", "time_us": t_avg, "time_us_max_rank": max(meds), "algbw_gbps": algbw,
                         "busbw_gbps": algbw * f, "busbw_factor": f})
                if ctx.rank == 0:
                    common.log(f"world {ctx.world} ctas {c} {coll}: busbw {algbw * f:.1f} GB/s")
                del op
            dist.destroy_process_group(g)
        except Exception as exc:  # noqa: BLE001
            ctx.error(f"channels {c}", exc)
    ctx.flush()


def _stage_contention(ctx: _Ctx) -> None:
    """A load on one stream while all-reduces run on another: each alone, then together (the bf16
    GEMM 8192^3 and a 1 GiB copy against one all-reduce size, both ranks loaded). Timed by the grid's
    cell (_contention_cell), kept in this stage's record format ("contention")."""
    torch, cfg = ctx.torch, ctx.cfg
    ar_bytes = cfg["contention_ar_bytes"]
    loads = {"gemm_8192_bf16": lambda: _gemm_load(torch, 8192, 8192, 8192),
             "copy_1GiB_bf16": lambda: _copy_load(torch, GIB)}
    for name, make in loads.items():
        if ctx.expired():
            ctx.add({"bench": "contention", "world_size": ctx.world, "load": name, "skipped": "budget"})
            continue
        try:
            fn, work, unit, _shape = make()
            cell = _contention_cell(ctx, name, fn, ar_bytes, load_ranks=list(range(ctx.world)),
                                    window_ms=cfg["contention_window_ms"], reps=cfg["contention_reps"], keep_calls=0)
            rec = {"bench": "contention", "world_size": ctx.world, "load": name, "load_calls": cell["load_calls"],
                   "load_work_per_call": work, "load_work_unit": unit, "allreduce_bytes": ar_bytes,
                   "allreduce_calls": cell["allreduce_calls"],
                   **{k: cell[k] for k in ("load_alone_us", "load_concurrent_us", "comm_alone_us", "comm_concurrent_us",
                                           "overlap_us", "load_slowdown", "comm_slowdown", "comm_alone_busbw_gbps",
                                           "samples")},
                   "load_slowdown_ranks": [p["load_slowdown"] for p in cell["per_rank"]],
                   "comm_slowdown_ranks": [p["comm_slowdown"] for p in cell["per_rank"]]}
            ctx.add(rec)
            if ctx.rank == 0:
                common.log(f"world {ctx.world} contention {name}: load x{rec['load_slowdown']:.3f}, "
                           f"all-reduce x{rec['comm_slowdown']:.3f}, overlap {rec['overlap_us']:.0f} us")
            del fn
        except Exception as exc:  # noqa: BLE001
            ctx.error(f"contention {name}", exc)
        torch.cuda.empty_cache()
    ctx.flush()


def _gemm_load(torch: Any, m: int, n: int, k: int) -> tuple[Any, int, str, dict[str, Any]]:
    """A bf16 GEMM load (m x k times k x n): (call, work, unit, shape)."""
    bf = torch.bfloat16
    a = torch.randn(m, k, device="cuda", dtype=bf)
    b = torch.randn(k, n, device="cuda", dtype=bf)
    c = torch.empty(m, n, device="cuda", dtype=bf)
    return (lambda: torch.mm(a, b, out=c)), 2 * m * n * k, "flops", {"m": m, "n": n, "k": k, "dtype": "bfloat16"}


def _copy_load(torch: Any, nbytes: int) -> tuple[Any, int, str, dict[str, Any]]:
    """A device-to-device copy of nbytes (bf16): (call, bytes moved, unit, shape)."""
    src = torch.randn(nbytes // 2, device="cuda", dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    return (lambda: dst.copy_(src)), 2 * nbytes, "bytes", {"bytes": nbytes, "dtype": "bfloat16"}


def _contention_cell(ctx: _Ctx, name: str, fn: Any, ar_bytes: int, *, load_ranks: list[int], window_ms: float,
                     reps: int, keep_calls: int) -> dict[str, Any]:
    """One load x one all-reduce size: the load alone, the all-reduce alone, both at once (on the
    ranks in load_ranks; the other ranks run only the all-reduces). The first concurrent repetition
    keeps every call's start and end (CUDA events between calls, us from the window's start) of both
    streams, so how the two interleave can be read back (keep_calls = 0: only each window's ends)."""
    torch, dist = ctx.torch, ctx.dist
    x = torch.ones(ar_bytes // 4, device="cuda")
    s_load, s_comm = torch.cuda.Stream(), torch.cuda.Stream()
    has_load = ctx.rank in load_ranks

    def ar() -> None:
        dist.all_reduce(x)

    def ev() -> Any:
        return torch.cuda.Event(enable_timing=True)

    def per_call_ms(stream: Any, f: Any) -> float:
        f()
        torch.cuda.synchronize()
        s, e = ev(), ev()
        s.record(stream)
        with torch.cuda.stream(stream):
            for _ in range(3):
                f()
        e.record(stream)
        torch.cuda.synchronize()
        return float(s.elapsed_time(e) / 3)

    ar_ms = ctx.agree_max(per_call_ms(s_comm, ar))
    load_ms = ctx.agree_max(per_call_ms(s_load, fn) if has_load else 0.0)
    n_ar = int(max(1, min(5000, window_ms / max(ar_ms, 1e-3))))
    n_load = int(max(1, min(5000, window_ms / max(load_ms, 1e-3)))) if load_ms > 0 else 0
    alone_load, alone_ar, conc_load, conc_ar, overlap = [], [], [], [], []
    calls: dict[str, Any] = {}
    for rep in range(reps):
        keep = rep == 0 and keep_calls > 0
        if has_load:
            torch.cuda.synchronize()
            s, e = ev(), ev()
            s.record(s_load)
            with torch.cuda.stream(s_load):
                for _ in range(n_load):
                    fn()
            e.record(s_load)
            torch.cuda.synchronize()
            alone_load.append(s.elapsed_time(e) * 1e3)
        dist.barrier()
        torch.cuda.synchronize()
        s, e = ev(), ev()
        s.record(s_comm)
        with torch.cuda.stream(s_comm):
            for _ in range(n_ar):
                ar()
        e.record(s_comm)
        torch.cuda.synchronize()
        alone_ar.append(s.elapsed_time(e) * 1e3)
        dist.barrier()
        ref = ev()
        ref.record()
        s_comm.wait_stream(torch.cuda.current_stream())
        s_load.wait_stream(torch.cuda.current_stream())
        ar_ev = [ev() for _ in range(n_ar + 1)] if keep else [ev(), ev()]
        ld_ev = [ev() for _ in range(n_load + 1)] if keep else [ev(), ev()]
        ar_ev[0].record(s_comm)
        if has_load:
            ld_ev[0].record(s_load)
        for i in range(max(n_ar, n_load if has_load else 0)):
            if i < n_ar:
                with torch.cuda.stream(s_comm):
                    ar()
                if keep:
                    ar_ev[i + 1].record(s_comm)
            if has_load and i < n_load:
                with torch.cuda.stream(s_load):
                    fn()
                if keep:
                    ld_ev[i + 1].record(s_load)
        if not keep:
            ar_ev[-1].record(s_comm)
            if has_load:
                ld_ev[-1].record(s_load)
        torch.cuda.synchronize()
        conc_ar.append(ar_ev[0].elapsed_time(ar_ev[-1]) * 1e3)
        if has_load:
            conc_load.append(ld_ev[0].elapsed_time(ld_ev[-1]) * 1e3)
            a0, a1 = ref.elapsed_time(ar_ev[0]), ref.elapsed_time(ar_ev[-1])
            b0, b1 = ref.elapsed_time(ld_ev[0]), ref.elapsed_time(ld_ev[-1])
            overlap.append(max(0.0, min(a1, b1) - max(a0, b0)) * 1e3)
        if keep and ctx.rank == 0:
            t0 = min(ref.elapsed_time(ar_ev[0]), ref.elapsed_time(ld_ev[0]) if has_load else 1e30)
            calls["allreduce_end_us"] = [round((ref.elapsed_time(v) - t0) * 1e3, 2) for v in ar_ev][:keep_calls]
            if has_load:
                calls["load_end_us"] = [round((ref.elapsed_time(v) - t0) * 1e3, 2) for v in ld_ev][:keep_calls]
            calls["note"] = "event times in us from the first start; entry 0 is the stream's start, entry i the end of call i"
    med = statistics.median
    mine = {"comm_slowdown": med(conc_ar) / med(alone_ar),
            "load_slowdown": med(conc_load) / med(alone_load) if has_load else None,
            "comm_alone_us": med(alone_ar), "comm_concurrent_us": med(conc_ar),
            "load_alone_us": med(alone_load) if has_load else None,
            "load_concurrent_us": med(conc_load) if has_load else None}
    ranks = ctx.gather(mine)
    r0 = ranks[0]
    rec = {"bench": "contention_grid", "world_size": ctx.world, "load": name, "load_ranks": load_ranks,
           "allreduce_bytes": ar_bytes, "allreduce_calls": n_ar, "load_calls": n_load,
           "allreduce_per_call_probe_us": ar_ms * 1e3, "load_per_call_probe_us": load_ms * 1e3,
           "comm_alone_us": r0["comm_alone_us"], "comm_concurrent_us": r0["comm_concurrent_us"],
           "load_alone_us": r0["load_alone_us"], "load_concurrent_us": r0["load_concurrent_us"],
           "comm_slowdown": r0["comm_slowdown"], "load_slowdown": r0["load_slowdown"],
           "overlap_us": med(overlap) if overlap else None, "per_rank": ranks,
           "comm_alone_busbw_gbps": busbw_factor("all_reduce", ctx.world) * ar_bytes * n_ar
           / (r0["comm_alone_us"] * 1e-6) / 1e9,
           "samples": {"load_alone_us": alone_load, "load_concurrent_us": conc_load,
                       "comm_alone_us": alone_ar, "comm_concurrent_us": conc_ar, "overlap_us": overlap},
           "calls_rank0": calls}
    return rec


def _stage_contention_grid(ctx: _Ctx) -> None:
    """Loads (bf16 GEMMs of several sizes: one wave to many waves; copies) x all-reduce sizes on two
    streams; the load on every rank, and (a few cells) on rank 0 only."""
    torch, cfg = ctx.torch, ctx.cfg
    for load in cfg["grid_loads"]:
        kind, dims = load[0], load[1:]
        try:
            if kind == "gemm":
                fn, work, unit, shape = _gemm_load(torch, *dims)
                name = "gemm_{}x{}x{}_bf16".format(*dims)
            else:
                fn, work, unit, shape = _copy_load(torch, dims[0])
                name = f"copy_{dims[0] >> 20}MiB_bf16"
        except Exception as exc:  # noqa: BLE001
            ctx.error(f"grid load {load}", exc)
            continue
        cells = [(ar, list(range(ctx.world))) for ar in cfg["grid_ar_bytes"]]
        if list(load) in [list(x) for x in cfg["grid_one_rank_loads"]] and ctx.world > 1:
            cells.append((cfg["grid_one_rank_ar_bytes"], [0]))
        for ar_bytes, load_ranks in cells:
            if ctx.expired():
                ctx.add({"bench": "contention_grid", "world_size": ctx.world, "load": name,
                         "allreduce_bytes": ar_bytes, "load_ranks": load_ranks, "skipped": "budget"})
                continue
            try:
                rec = _contention_cell(ctx, name, fn, ar_bytes, load_ranks=load_ranks,
                                       window_ms=cfg["grid_window_ms"], reps=cfg["grid_reps"],
                                       keep_calls=cfg["grid_keep_calls"])
                rec.update({"load_work_per_call": work, "load_work_unit": unit, "load_shape": shape})
                ctx.add(rec)
                if ctx.rank == 0:
                    ls = rec["load_slowdown"]
                    common.log(f"world {ctx.world} grid {name} x all-reduce {ar_bytes >> 20} MiB ranks {load_ranks}: "
                               f"load x{ls if ls is None else round(ls, 3)}, all-reduce x{rec['comm_slowdown']:.3f}")
            except Exception as exc:  # noqa: BLE001
                ctx.error(f"grid {name} {ar_bytes}", exc)
        del fn
        torch.cuda.empty_cache()
        ctx.flush()


def _kernel_timeline(prof: Any, keep: int) -> list[dict[str, Any]]:
    """The GPU kernels, copies and sets of a torch.profiler run (its Chrome trace): name, stream,
    start (us from the first) and duration (us)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as fh:
            events = json.load(fh).get("traceEvents", [])
    out = [{"name": str(e.get("name", ""))[:120], "cat": e.get("cat"), "stream": (e.get("args") or {}).get("stream"),
            "start_us": float(e["ts"]), "dur_us": float(e.get("dur", 0.0))}
           for e in events if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    out.sort(key=lambda r: r["start_us"])
    if out:
        t0 = out[0]["start_us"]
        for r in out:
            r["start_us"] = round(r["start_us"] - t0, 3)
            r["dur_us"] = round(r["dur_us"], 3)
    return out[:keep]


def _time_step_pair(ctx: _Ctx, step: Any, step_nosync: Any, n_steps: int) -> tuple[list[float], ...]:
    """DDP's step and the same step under no_sync(), alternated n_steps times after 3 warm-ups of
    each: (device us with communication, device us without, host enqueue us with, host enqueue us
    without). Each step starts from a barrier and an idle GPU; device time between two events on
    the default stream, host time until the step's calls return."""
    torch, dist = ctx.torch, ctx.dist
    for _ in range(3):
        step()
        step_nosync()
    torch.cuda.synchronize()
    with_comm: list[float] = []
    without: list[float] = []
    cpu_with: list[float] = []
    cpu_without: list[float] = []
    for _ in range(n_steps):
        for fn, dev_out, cpu_out in ((step, with_comm, cpu_with), (step_nosync, without, cpu_without)):
            dist.barrier()
            torch.cuda.synchronize()
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            t0 = time.perf_counter()
            s.record()
            fn()
            e.record()
            t1 = time.perf_counter()
            torch.cuda.synchronize()
            dev_out.append(s.elapsed_time(e) * 1e3)
            cpu_out.append((t1 - t0) * 1e6)
    return with_comm, without, cpu_with, cpu_without


def _ddp_variant(ctx: _Ctx, var: dict[str, Any]) -> None:
    """One DDP workload: `layers` blocks (Linear H->F, GELU, Linear F->H, bf16), a bucket cap, whether
    gradients are bucket views; per token count the step with and without communication; one
    profiled step (rank 0's kernel timeline) at the first token count."""
    torch, dist, cfg = ctx.torch, ctx.dist, ctx.cfg
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    H, F, L, bucket_mb = var["hidden"], var["ffn"], var["layers"], var["bucket_cap_mb"]
    as_view = bool(var.get("gradient_as_bucket_view", False))
    torch.manual_seed(0)
    blocks: list[Any] = []
    for _ in range(L):
        blocks += [nn.Linear(H, F), nn.GELU(), nn.Linear(F, H)]
    model = nn.Sequential(*blocks).to(device="cuda", dtype=torch.bfloat16)
    ddp = DDP(model, device_ids=[ctx.rank], bucket_cap_mb=bucket_mb, gradient_as_bucket_view=as_view)
    params = list(ddp.parameters())
    grad_bytes = sum(p.numel() * p.element_size() for p in params)
    flat = torch.ones(sum(p.numel() for p in params), device="cuda", dtype=torch.bfloat16)
    ar = _time_calls(ctx, lambda: dist.all_reduce(flat), target_ms=cfg["target_ms_large"], n_samples=cfg["n_samples"])
    ar_us = sum(ctx.gather(ar["median_us"])) / ctx.world
    base = {"bench": "ddp_variant", "variant": var["name"], "world_size": ctx.world, "hidden": H, "ffn": F,
            "layers": L, "dtype": "bfloat16", "bucket_cap_mb": bucket_mb, "gradient_as_bucket_view": as_view,
            "grad_bytes": grad_bytes, "param_bytes": [p.numel() * p.element_size() for p in params],
            "allreduce_all_grads_us": ar_us}
    for i, tokens in enumerate(var["tokens"]):
        if ctx.expired():
            ctx.add({**base, "tokens": tokens, "skipped": "budget"})
            continue
        try:
            x = torch.randn(tokens, H, device="cuda", dtype=torch.bfloat16)
            gy = torch.randn(tokens, H, device="cuda", dtype=torch.bfloat16)

            def step(x: Any = x, gy: Any = gy) -> None:
                ddp(x).backward(gy)
                for p in params:
                    p.grad = None

            def step_nosync(x: Any = x, gy: Any = gy) -> None:
                with ddp.no_sync():
                    ddp(x).backward(gy)
                for p in params:
                    p.grad = None

            with_comm, without, cpu_with, cpu_without = _time_step_pair(ctx, step, step_nosync, cfg["ddp_steps"])
            med = statistics.median
            step_us = sum(ctx.gather(med(with_comm))) / ctx.world
            nosync_us = sum(ctx.gather(med(without))) / ctx.world
            rec = {**base, "tokens": tokens, "flops": 3 * 2 * 2 * tokens * H * F * L, "step_us": step_us,
                   "step_no_comm_us": nosync_us, "exposed_comm_us": step_us - nosync_us,
                   "cpu_enqueue_us": sum(ctx.gather(med(cpu_with))) / ctx.world,
                   "cpu_enqueue_no_comm_us": sum(ctx.gather(med(cpu_without))) / ctx.world,
                   "rank0": {"step_samples_us": common.trim_samples(with_comm),
                             "no_comm_samples_us": common.trim_samples(without),
                             "cpu_samples_us": common.trim_samples(cpu_with),
                             "cpu_no_comm_samples_us": common.trim_samples(cpu_without)}}
            if i == 0 and cfg["ddp_profile"] and not ctx.expired():
                try:
                    from torch.profiler import ProfilerActivity, profile

                    dist.barrier()
                    torch.cuda.synchronize()
                    with profile(activities=[ProfilerActivity.CUDA]) as prof:
                        step()
                        torch.cuda.synchronize()
                    if ctx.rank == 0:
                        rec["timeline_rank0"] = _kernel_timeline(prof, cfg["ddp_profile_keep"])
                except Exception as exc:  # noqa: BLE001 - the timeline is extra; the step times stand
                    rec["timeline_error"] = repr(exc)[:300]
            ctx.add(rec)
            if ctx.rank == 0:
                common.log(f"world {ctx.world} ddp {var['name']} T={tokens}: step {step_us:.0f} us, no comm "
                           f"{nosync_us:.0f} us, exposed {step_us - nosync_us:.0f} us of {ar_us:.0f} us all-reduce")
        except Exception as exc:  # noqa: BLE001
            ctx.error(f"ddp {var['name']} tokens {tokens}", exc)


def _each_variant(ctx: _Ctx, key: str, bench: str, label: str, run: Any) -> None:
    """`run(ctx, var)` for each variant of config list `key`, within the budget (a variant past it is
    recorded as skipped); one variant's failure is recorded and the next one runs."""
    for var in ctx.cfg[key]:
        if ctx.expired():
            ctx.add({"bench": bench, "variant": var["name"], "world_size": ctx.world, "skipped": "budget"})
            continue
        try:
            run(ctx, var)
        except Exception as exc:  # noqa: BLE001
            ctx.error(f"{label} {var['name']}", exc)
        ctx.torch.cuda.empty_cache()
        ctx.flush()


def _stage_ddp_grid(ctx: _Ctx) -> None:
    """DDP workloads that differ by model (width, depth) and bucket cap (held out by workload)."""
    _each_variant(ctx, "ddp_variants", "ddp_variant", "ddp variant", _ddp_variant)


# ----------------------------------------------------------------------------- GEMM beside a resident occupier


def _kernel_meta(ctx: _Ctx, fn: Any, keep: int = 8) -> list[dict[str, Any]]:
    """The GPU kernels of one call of fn under torch.profiler: name, duration and the launch
    configuration the trace records (grid, block, registers per thread, shared memory, blocks per SM)."""
    import tempfile

    torch = ctx.torch
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as fh:
            events = json.load(fh).get("traceEvents", [])
    out = []
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy"):
            a = e.get("args") or {}
            out.append({"name": str(e.get("name", ""))[:160], "cat": e.get("cat"), "dur_us": float(e.get("dur", 0.0)),
                        **{k: a.get(k) for k in ("grid", "block", "registers per thread", "shared memory",
                                                 "blocks per SM", "warps per SM", "est. achieved occupancy %")
                           if k in a}})
    return out[:keep]


def _beside(ctx: _Ctx, gemm: Any, n_gemm: int, occupy: Any, delay_cycles: int) -> dict[str, Any]:
    """One repetition: `occupy(ref)` enqueues the occupier on its own stream(s) and returns the events
    recorded after it; then, on the GEMM stream, a short spin (so the occupier is resident first, as
    DDP's all-reduce is when a backward GEMM starts) and n_gemm GEMM calls between two events.
    Returns the GEMM's per-call time and whether its window ended before the occupier did."""
    torch = ctx.torch
    s_gemm = ctx.share_stream

    def ev() -> Any:
        return torch.cuda.Event(enable_timing=True)

    torch.cuda.synchronize()
    ref = ev()
    ref.record()
    s_gemm.wait_stream(torch.cuda.current_stream())
    occ_ends = occupy()
    g0, g1 = ev(), ev()
    with torch.cuda.stream(s_gemm):
        torch.cuda._sleep(delay_cycles)
        g0.record(s_gemm)
        for _ in range(n_gemm):
            gemm()
        g1.record(s_gemm)
    torch.cuda.synchronize()
    t_g0, t_g1 = ref.elapsed_time(g0) * 1e3, ref.elapsed_time(g1) * 1e3
    occ_end = min(ref.elapsed_time(e) * 1e3 for e in occ_ends) if occ_ends else None
    return {"per_call_us": (t_g1 - t_g0) / n_gemm, "gemm_start_us": t_g0, "gemm_end_us": t_g1,
            "occupier_end_us": occ_end, "contained": occ_end is None or occ_end >= t_g1}


def _share_cells(ctx: _Ctx, groups: dict[str, Any], ar_us: dict[str, float], copy_us: float, occ_us: float,
                 cyc_per_us: float, x: Any, src: Any, dst: Any, occ_streams: list[Any]) -> list[tuple[str, dict[str, Any], Any]]:
    """Stage sm_share's cells for one GEMM: (name, record fields, occupier) where the occupier enqueues
    work lasting about occ_us on its own stream(s) and returns the events recorded after it."""
    torch, dist = ctx.torch, ctx.dist

    def ev() -> Any:
        return torch.cuda.Event(enable_timing=True)

    def enqueue(streams: list[Any], body: Any) -> list[Any]:
        ends = []
        for st in streams:
            st.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(st):
                body()
            en = ev()
            en.record(st)
            ends.append(en)
        return ends

    def spin(kk: int) -> Any:
        cycles = int(occ_us * cyc_per_us)
        return lambda: enqueue(occ_streams[:kk], lambda: torch.cuda._sleep(cycles))

    def allreduce(g: Any, n_ar: int) -> Any:
        def body() -> None:
            for _ in range(n_ar):
                dist.all_reduce(x, group=g)
        return lambda: enqueue(occ_streams[:1], body)

    def copy(n_cp: int) -> Any:
        def body() -> None:
            for _ in range(n_cp):
                dst.copy_(src)
        return lambda: enqueue(occ_streams[:1], body)

    cells: list[tuple[str, dict[str, Any], Any]] = [("alone", {}, lambda: [])]
    for kk in ctx.cfg["share_spins"]:
        cells.append((f"spin{kk}", {"occupier": "spin", "spin_kernels": kk}, spin(kk)))
    for gname, g in groups.items():
        if gname in ar_us:
            n_ar = int(max(1, min(400, occ_us / max(ar_us[gname], 1.0) + 1)))
            cells.append((f"allreduce_{gname}", {"occupier": "all_reduce", "ctas": None if g is None else int(gname[4:]),
                                                 "allreduce_alone_us": ar_us[gname], "allreduce_calls": n_ar},
                          allreduce(g, n_ar)))
    n_cp = int(max(1, min(400, occ_us / max(copy_us, 1.0) + 1)))
    cells.append(("copy", {"occupier": "copy", "copy_calls": n_cp, "copy_alone_us": copy_us}, copy(n_cp)))
    return cells


def _stage_sm_share(ctx: _Ctx) -> None:
    """A bf16 GEMM (calibration-split shapes) started while an occupier is already resident, as a DDP
    backward GEMM starts beside a running bucket all-reduce: alone; beside k one-thread spin kernels
    (torch.cuda._sleep on k streams of torch's 32-stream pool: they hold at most k SMs and move no memory;
    run alone, the stage asks for 32 hardware queues so those streams do not serialise); beside all-reduces on
    groups whose NCCL config pins c channels (c CTAs, one per channel) and on the default group; beside
    a 1 GiB device copy (HBM traffic). Per cell the GEMM's per-call time on every rank (median of reps)
    and whether its window lay inside the occupier's. Kernel launch configurations (grid, block,
    registers, shared memory) of the GEMMs, the spin kernel and each group's all-reduce are recorded."""
    torch, dist, cfg = ctx.torch, ctx.dist, ctx.cfg
    ctx.share_stream = torch.cuda.Stream()
    ev = lambda: torch.cuda.Event(enable_timing=True)  # noqa: E731
    # cycles per us of torch.cuda._sleep on this GPU
    torch.cuda._sleep(1000)
    torch.cuda.synchronize()
    s, e = ev(), ev()
    s.record()
    torch.cuda._sleep(20_000_000)
    e.record()
    torch.cuda.synchronize()
    cyc_per_us = ctx.agree_max(20_000_000 / max(s.elapsed_time(e) * 1e3, 1.0))
    delay = int(cfg["share_delay_us"] * cyc_per_us)
    sm_count = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    groups: dict[str, Any] = {"default": None}
    for c in cfg["share_channels"]:
        try:
            opts = dist.ProcessGroupNCCL.Options()
            opts.config.min_ctas = c
            opts.config.max_ctas = c
            groups[f"ctas{c}"] = dist.new_group(ranks=list(range(ctx.world)), backend="nccl", pg_options=opts)
        except Exception as exc:  # noqa: BLE001
            ctx.error(f"sm_share group ctas {c}", exc)
    ar_bytes = cfg["share_ar_bytes"]
    x = torch.ones(ar_bytes // 4, device="cuda")
    src = torch.randn(cfg["share_copy_bytes"] // 2, device="cuda", dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    occ_streams = [torch.cuda.Stream() for _ in range(max(cfg["share_spins"] + [1]))]
    meta: dict[str, Any] = {"sm_count": sm_count, "sleep_cycles_per_us": cyc_per_us,
                            "cuda_device_max_connections": os.environ.get("CUDA_DEVICE_MAX_CONNECTIONS"),
                            "spin_kernel": _kernel_meta(ctx, lambda: torch.cuda._sleep(1000), 2),
                            "copy_kernel": _kernel_meta(ctx, lambda: dst.copy_(src), 2)}
    ar_us: dict[str, float] = {}
    for gname, g in groups.items():
        try:
            meta[f"allreduce_kernel_{gname}"] = _kernel_meta(ctx, lambda g=g: dist.all_reduce(x, group=g), 2)
            torch.cuda.synchronize()
            s, e = ev(), ev()
            s.record()
            for _ in range(3):
                dist.all_reduce(x, group=g)
            e.record()
            torch.cuda.synchronize()
            ar_us[gname] = ctx.agree_max(s.elapsed_time(e) * 1e3 / 3)
        except Exception as exc:  # noqa: BLE001
            ctx.error(f"sm_share all-reduce {gname}", exc)
    meta["allreduce_alone_us"] = ar_us
    dst.copy_(src)
    torch.cuda.synchronize()
    s, e = ev(), ev()
    s.record()
    for _ in range(3):
        dst.copy_(src)
    e.record()
    torch.cuda.synchronize()
    copy_us = ctx.agree_max(s.elapsed_time(e) * 1e3 / 3)
    meta["copy_alone_us"] = copy_us
    ctx.add({"bench": "sm_share_meta", "world_size": ctx.world, "allreduce_bytes": ar_bytes,
             "copy_bytes": cfg["share_copy_bytes"], "delay_us": cfg["share_delay_us"], "per_rank": ctx.gather(meta)})
    ctx.flush()
    for m, n, k in cfg["share_gemms"]:
        name = f"gemm_{m}x{n}x{k}_bf16"
        if ctx.expired():
            ctx.add({"bench": "sm_share", "world_size": ctx.world, "load": name, "skipped": "budget"})
            continue
        try:
            gemm, work, _unit, shape = _gemm_load(torch, m, n, k)
            kmeta = _kernel_meta(ctx, gemm, 4)
            with torch.cuda.stream(ctx.share_stream):
                for _ in range(3):
                    gemm()
            torch.cuda.synchronize()
            s, e = ev(), ev()
            s.record(ctx.share_stream)
            with torch.cuda.stream(ctx.share_stream):
                for _ in range(5):
                    gemm()
            e.record(ctx.share_stream)
            torch.cuda.synchronize()
            probe_us = ctx.agree_max(s.elapsed_time(e) * 1e3 / 5)
            n_gemm = int(max(3, min(200, cfg["share_window_us"] / probe_us)))
            occ_us = cfg["share_delay_us"] + 3.0 * n_gemm * probe_us + 500.0
            reps = cfg["share_reps"]
            cells = _share_cells(ctx, groups, ar_us, copy_us, occ_us, cyc_per_us, x, src, dst, occ_streams)
            results: dict[str, Any] = {}
            for cname, info, occ in cells:
                runs = []
                for _ in range(reps):
                    if info.get("occupier") == "all_reduce":
                        dist.barrier()
                    runs.append(_beside(ctx, gemm, n_gemm, occ, delay))
                per_rank = ctx.gather({"per_call_us": statistics.median(r["per_call_us"] for r in runs),
                                       "contained": all(r["contained"] for r in runs),
                                       "gemm_start_us": statistics.median(r["gemm_start_us"] for r in runs),
                                       "samples_us": [round(r["per_call_us"], 2) for r in runs]})
                results[cname] = {**info, "per_rank": per_rank}
            alone = [p["per_call_us"] for p in results["alone"]["per_rank"]]
            for r in results.values():
                r["slowdown_ranks"] = [p["per_call_us"] / a for p, a in zip(r["per_rank"], alone, strict=True)]
            ctx.add({"bench": "sm_share", "world_size": ctx.world, "load": name, "load_shape": shape,
                     "load_work_per_call": work, "gemm_calls": n_gemm, "gemm_probe_us": probe_us,
                     "gemm_kernels_rank0": kmeta, "cells": results})
            if ctx.rank == 0:
                common.log(f"world {ctx.world} sm_share {name}: " + ", ".join(
                    f"{c} x{r['slowdown_ranks'][0]:.2f}" for c, r in results.items()))
            del gemm
        except Exception as exc:  # noqa: BLE001
            ctx.error(f"sm_share {name}", exc)
        torch.cuda.empty_cache()
        ctx.flush()
    for gname, g in groups.items():
        if g is not None:
            try:
                dist.destroy_process_group(g)
            except Exception as exc:  # noqa: BLE001
                ctx.error(f"sm_share destroy {gname}", exc)


# ----------------------------------------------------------------------------- per-rank DDP timelines


def _rank_kineto(prof: Any, keep: int) -> list[dict[str, Any]]:
    """Every CPU op, annotation, runtime call and GPU activity of a torch.profiler run, with the
    profiler's own absolute timestamps (us) and thread / stream: name, cat, tid, ts_us, dur_us."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as fh:
            events = json.load(fh).get("traceEvents", [])
    cats = ("kernel", "gpu_memcpy", "gpu_memset", "cpu_op", "user_annotation", "cuda_runtime", "cuda_driver")
    out = [{"name": str(e.get("name", ""))[:100], "cat": e.get("cat"), "tid": e.get("tid"),
            "stream": (e.get("args") or {}).get("stream"), "ts_us": round(float(e["ts"]), 3),
            "dur_us": round(float(e.get("dur", 0.0)), 3)}
           for e in events if e.get("ph") == "X" and e.get("cat") in cats]
    out.sort(key=lambda r: r["ts_us"])
    return out[:keep]


def _ddp_model(ctx: _Ctx, var: dict[str, Any], hook_log: list[Any] | None) -> tuple[Any, list[Any]]:
    """The ddp_grid workload `var` under DDP (seed 0); with `hook_log`, a comm hook that records, per
    bucket and before DDP's own all-reduce hook runs, the host clock (perf_counter_ns, one clock for
    every process of the host) on entry and on return, and a CUDA event on the backward's stream (the
    device time the bucket's last gradient is in)."""
    torch = ctx.torch
    from torch import nn
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(0)
    blocks: list[Any] = []
    for _ in range(var["layers"]):
        blocks += [nn.Linear(var["hidden"], var["ffn"]), nn.GELU(), nn.Linear(var["ffn"], var["hidden"])]
    model = nn.Sequential(*blocks).to(device="cuda", dtype=torch.bfloat16)
    ddp = DDP(model, device_ids=[ctx.rank], bucket_cap_mb=var["bucket_cap_mb"],
              gradient_as_bucket_view=bool(var.get("gradient_as_bucket_view", False)))
    if hook_log is not None:
        def hook(state: Any, bucket: Any) -> Any:
            t_in = time.perf_counter_ns()
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            fut = default_hooks.allreduce_hook(state, bucket)
            buf = bucket.buffer()
            hook_log.append((bucket.index(), buf.numel() * buf.element_size(), t_in, time.perf_counter_ns(), ev))
            return fut
        # DDP refuses a hook whose annotations are not dist.GradBucket / Future[Tensor]; under
        # `from __future__ import annotations` they are strings, so the hook goes unannotated
        hook.__annotations__ = {}
        ddp.register_comm_hook(None, hook)
    return ddp, list(ddp.parameters())


def _ranks_step(ctx: _Ctx, ddp: Any, params: list[Any], x: Any, gy: Any, sync: bool,
                hook_log: list[Any] | None) -> dict[str, Any]:
    """One step from a barrier and an idle GPU on this rank: host clock (perf_counter_ns, us) at the
    barrier's return, the step call and its return; device us from the start event to the end event
    and, with a comm hook, to each bucket's hook event."""
    torch, dist = ctx.torch, ctx.dist
    dist.barrier()
    torch.cuda.synchronize()
    if hook_log is not None:
        hook_log.clear()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t_ready = time.perf_counter_ns()
    s.record()
    t0 = time.perf_counter_ns()
    if sync:
        ddp(x).backward(gy)
    else:
        with ddp.no_sync():
            ddp(x).backward(gy)
    e.record()
    t1 = time.perf_counter_ns()
    torch.cuda.synchronize()
    t_done = time.perf_counter_ns()
    for p in params:
        p.grad = None
    out: dict[str, Any] = {"host_ready_us": t_ready / 1e3, "host_call_us": t0 / 1e3, "host_return_us": t1 / 1e3,
                           "host_synced_us": t_done / 1e3, "device_us": s.elapsed_time(e) * 1e3}
    if hook_log:
        out["buckets"] = [{"index": i, "bytes": nb, "host_in_us": a / 1e3, "host_out_us": b / 1e3,
                           "device_ready_us": round(s.elapsed_time(ev) * 1e3, 2)} for i, nb, a, b, ev in hook_log]
    return out


def _ddp_ranks_variant(ctx: _Ctx, var: dict[str, Any]) -> None:
    """One ddp_grid workload, per token count: `ddp_rank_steps` steps of each mode, alternated — DDP
    as shipped ("ddp"), DDP with the timestamping comm hook ("ddp_hook"), under no_sync ("no_sync")
    — with every rank's own clocks, then one profiled step per rank ("ddp", CPU and CUDA activity, the
    profiler's absolute times, a `ks_step` annotation whose host clock is recorded, so both ranks map
    onto one clock)."""
    torch, cfg = ctx.torch, ctx.cfg
    hook_log: list[Any] = []
    ddp, params = _ddp_model(ctx, var, None)
    ddp_h, params_h = _ddp_model(ctx, var, hook_log)
    base = {"bench": "ddp_ranks", "variant": var["name"], "world_size": ctx.world, "hidden": var["hidden"],
            "ffn": var["ffn"], "layers": var["layers"], "dtype": "bfloat16", "bucket_cap_mb": var["bucket_cap_mb"],
            "gradient_as_bucket_view": bool(var.get("gradient_as_bucket_view", False)),
            "param_bytes": [p.numel() * p.element_size() for p in params], "clock": "time.perf_counter_ns (us)"}
    modes = (("ddp", ddp, params, True, None), ("ddp_hook", ddp_h, params_h, True, hook_log),
             ("no_sync", ddp, params, False, None))
    for tokens in var["tokens"]:
        if ctx.expired():
            ctx.add({**base, "tokens": tokens, "skipped": "budget"})
            continue
        try:
            x = torch.randn(tokens, var["hidden"], device="cuda", dtype=torch.bfloat16)
            gy = torch.randn(tokens, var["hidden"], device="cuda", dtype=torch.bfloat16)
            for _ in range(3):
                for _name, d, ps, sync, log in modes:
                    _ranks_step(ctx, d, ps, x, gy, sync, log)
            steps: dict[str, list[dict[str, Any]]] = {name: [] for name, *_ in modes}
            for _ in range(cfg["ddp_rank_steps"]):
                for name, d, ps, sync, log in modes:
                    steps[name].append(_ranks_step(ctx, d, ps, x, gy, sync, log))
            mine: dict[str, Any] = {"rank": ctx.rank, "steps": steps}
            if cfg["ddp_profile"] and not ctx.expired():
                try:
                    from torch.profiler import ProfilerActivity, profile, record_function

                    ctx.dist.barrier()
                    torch.cuda.synchronize()
                    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                        ctx.dist.barrier()
                        torch.cuda.synchronize()
                        t_mark = time.perf_counter_ns()
                        with record_function("ks_step"):
                            ddp(x).backward(gy)
                        torch.cuda.synchronize()
                    for p in params:
                        p.grad = None
                    mine["profile"] = {"ks_step_host_us": t_mark / 1e3,
                                       "events": _rank_kineto(prof, cfg["ddp_rank_keep"])}
                except Exception as exc:  # noqa: BLE001 - the timeline is extra; the clocks stand
                    mine["profile_error"] = repr(exc)[:300]
            ranks = ctx.gather(mine)
            ctx.add({**base, "tokens": tokens, "ranks": ranks})
            if ctx.rank == 0:
                med = statistics.median
                dev = {n: [med(s["device_us"] for s in r["steps"][n]) for r in ranks] for n, *_ in modes}
                common.log(f"world {ctx.world} ddp_ranks {var['name']} T={tokens}: device us per rank "
                           + ", ".join(f"{n} {[round(v) for v in dev[n]]}" for n in dev))
        except Exception as exc:  # noqa: BLE001
            ctx.error(f"ddp_ranks {var['name']} tokens {tokens}", exc)
    del ddp, ddp_h


def _stage_ddp_ranks(ctx: _Ctx) -> None:
    """The ddp_grid workloads with every rank's clocks (rank skew, DDP's host cost per bucket)."""
    _each_variant(ctx, "ddp_rank_variants", "ddp_ranks", "ddp_ranks", _ddp_ranks_variant)


def _stage_ddp(ctx: _Ctx) -> None:
    """DDP MLP step (bucketed all-reduce in backward) against the same step under no_sync()."""
    torch, dist, cfg = ctx.torch, ctx.dist, ctx.cfg
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    H, F = cfg["ddp_hidden"], cfg["ddp_ffn"]
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(H, F), nn.GELU(), nn.Linear(F, H)).to(device="cuda", dtype=torch.bfloat16)
    bucket_mb = cfg["ddp_bucket_mb"]
    ddp = DDP(model, device_ids=[ctx.rank], bucket_cap_mb=bucket_mb)
    params = list(ddp.parameters())
    grad_bytes = sum(p.numel() * p.element_size() for p in params)
    flat = torch.ones(sum(p.numel() for p in params), device="cuda", dtype=torch.bfloat16)
    ar = _time_calls(ctx, lambda: dist.all_reduce(flat), target_ms=cfg["target_ms_large"], n_samples=cfg["n_samples"])
    ar_us = sum(ctx.gather(ar["median_us"])) / ctx.world
    for tokens in cfg["ddp_tokens"]:
        if ctx.expired():
            ctx.add({"bench": "ddp_step", "world_size": ctx.world, "tokens": tokens, "skipped": "budget"})
            continue
        try:
            x = torch.randn(tokens, H, device="cuda", dtype=torch.bfloat16)
            gy = torch.randn(tokens, H, device="cuda", dtype=torch.bfloat16)

            def step(x: Any = x, gy: Any = gy) -> None:
                ddp(x).backward(gy)
                for p in params:
                    p.grad = None

            def step_nosync(x: Any = x, gy: Any = gy) -> None:
                with ddp.no_sync():
                    ddp(x).backward(gy)
                for p in params:
                    p.grad = None

            with_comm, without, cpu_with, cpu_without = _time_step_pair(ctx, step, step_nosync, cfg["ddp_steps"])
            med = statistics.median
            step_us = sum(ctx.gather(med(with_comm))) / ctx.world
            nosync_us = sum(ctx.gather(med(without))) / ctx.world
            exposed = step_us - nosync_us
            rec = {"bench": "ddp_step", "world_size": ctx.world, "tokens": tokens, "hidden": H, "ffn": F,
                   "dtype": "bfloat16", "bucket_cap_mb": bucket_mb, "grad_bytes": grad_bytes,
                   "flops": 3 * 2 * 2 * tokens * H * F, "step_us": step_us, "step_no_comm_us": nosync_us,
                   "exposed_comm_us": exposed, "allreduce_all_grads_us": ar_us,
                   "exposed_fraction": exposed / ar_us if ar_us > 0 else None,
                   "cpu_enqueue_us": med(cpu_with), "cpu_enqueue_no_comm_us": med(cpu_without),
                   "rank0": {"step_samples_us": common.trim_samples(with_comm),
                             "no_comm_samples_us": common.trim_samples(without)}}
            ctx.add(rec)
            if ctx.rank == 0:
                common.log(f"world {ctx.world} ddp T={tokens}: step {step_us:.0f} us, no comm {nosync_us:.0f} us, "
                           f"exposed {exposed:.0f} us of {ar_us:.0f} us all-reduce")
        except Exception as exc:  # noqa: BLE001
            ctx.error(f"ddp tokens {tokens}", exc)
    ctx.flush()


def _stage_host(ctx: _Ctx) -> None:
    """Host cost of a torch.distributed call: perf_counter per call of back-to-back
    all-reduces / all-gathers on 4 KiB (until the call returns, no synchronize; median of 5
    loops of 200 calls), and the wall time of one call + synchronize from an idle GPU."""
    torch, dist = ctx.torch, ctx.dist
    x = torch.ones(1024, device="cuda")
    out = torch.empty(1024 * ctx.world, device="cuda")
    ops = {"all_reduce": lambda: dist.all_reduce(x),
           "all_gather_into_tensor": lambda: dist.all_gather_into_tensor(out, x),
           "all_reduce_async_op": lambda: dist.all_reduce(x, async_op=True)}
    for name, op in ops.items():
        try:
            for _ in range(20):
                op()
            torch.cuda.synchronize()
            dist.barrier()
            loops = []
            for _ in range(5):
                torch.cuda.synchronize()
                dist.barrier()
                t0 = time.perf_counter()
                for _ in range(200):
                    op()
                loops.append((time.perf_counter() - t0) * 1e6 / 200)
                torch.cuda.synchronize()
            single = []
            for _ in range(50):
                dist.barrier()
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                op()
                torch.cuda.synchronize()
                single.append((time.perf_counter() - t0) * 1e6)
            hosts = ctx.gather(statistics.median(loops))
            singles = ctx.gather(statistics.median(single))
            ctx.add({"bench": "dist_host", "call": name, "world_size": ctx.world, "bytes": 4096,
                     "host_us_per_call": sum(hosts) / len(hosts), "host_us_ranks": hosts,
                     "single_call_wall_us": sum(singles) / len(singles), "single_call_wall_us_ranks": singles,
                     "rank0_loop_samples_us": common.trim_samples(loops)})
            if ctx.rank == 0:
                common.log(f"world {ctx.world} host {name}: {sum(hosts) / len(hosts):.1f} us per call, "
                           f"single call + sync {sum(singles) / len(singles):.1f} us")
        except Exception as exc:  # noqa: BLE001
            ctx.error(f"host {name}", exc)
    ctx.flush()


def _worker(rank: int, world: int, port: int, cfg: dict[str, Any], result_path: str) -> None:
    multicast_off()
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    os.environ.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "3")  # a hung collective ends the process
    if cfg["stages"] == ["check", "sm_share"] or cfg["stages"] == ["sm_share"]:
        # stage sm_share runs up to 16 spin streams beside the GEMM's and NCCL's: with the default 8
        # hardware queues streams would share queues and serialise (false dependencies)
        os.environ.setdefault("CUDA_DEVICE_MAX_CONNECTIONS", "32")
    if rank == 0 and cfg.get("nccl_log"):
        os.environ["NCCL_DEBUG"] = "INFO"
        os.environ["NCCL_DEBUG_SUBSYS"] = "INIT,GRAPH,ENV"
        os.environ["NCCL_DEBUG_FILE"] = cfg["nccl_log"]
    import datetime

    import torch
    import torch.distributed as dist

    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=cfg["timeout_s"]),
                            device_id=torch.device("cuda", rank))
    ctx = _Ctx(rank, world, cfg, result_path)
    ctx.add({"bench": "rank_info", "world_size": world,
             "devices": ctx.gather({"rank": rank, "device": torch.cuda.get_device_name(rank),
                                    "pci_bus_id": torch.cuda.get_device_properties(rank).pci_bus_id
                                    if hasattr(torch.cuda.get_device_properties(rank), "pci_bus_id") else None,
                                    "pid": os.getpid()})})
    ctx.flush()
    stages = [("check", _stage_check), ("host", _stage_host), ("collectives", _stage_collectives),
              ("channels", _stage_channels), ("contention", _stage_contention), ("ddp", _stage_ddp),
              ("contention_grid", _stage_contention_grid), ("ddp_grid", _stage_ddp_grid),
              ("ddp_ranks", _stage_ddp_ranks), ("sm_share", _stage_sm_share)]
    for name, fn in stages:
        if name not in cfg["stages"]:
            continue
        t0 = time.time()
        try:
            fn(ctx)
        except Exception as exc:  # noqa: BLE001 - recorded; the next stage still runs
            ctx.error(name, exc)
        if rank == 0:
            common.log(f"world {world}: stage {name} took {time.time() - t0:.1f} s")
        ctx.flush()
    try:
        dist.barrier()
        dist.destroy_process_group()
    except Exception as exc:  # noqa: BLE001
        ctx.error("shutdown", exc)
        ctx.flush()


# ----------------------------------------------------------------------------- parent


def parse_nccl_log(path: str, max_lines: int = 300) -> dict[str, Any]:
    """Rank 0's NCCL INFO log: the lines without host/pid prefix (deduplicated) and channel counts."""
    try:
        with open(path, errors="replace") as fh:
            raw = fh.read().splitlines()
    except OSError as exc:
        return {"error": repr(exc)}
    lines, seen = [], set()
    for ln in raw:
        ln = re.sub(r"^\S+:\d+:\d+ \[\d+\] ", "", ln).strip()
        if ln and ln not in seen:
            seen.add(ln)
            lines.append(ln)
    text = "\n".join(lines)
    info: dict[str, Any] = {"n_lines": len(raw), "lines": lines[:max_lines], "truncated": len(lines) > max_lines}
    for key, pat in (("coll_channels", r"(\d+) coll channels"), ("nvls_channels", r"(\d+) nvls channels"),
                     ("p2p_channels", r"(\d+) p2p channels,"), ("nccl_version", r"NCCL version ([\w.+-]+)")):
        m = re.search(pat, text)
        if m:
            info[key] = int(m.group(1)) if m.group(1).isdigit() else m.group(1)
    info["transports"] = sorted({m.group(1) for m in re.finditer(r"via (\S+)", text)})
    return info


def _ddp_variants(quick: bool) -> list[dict[str, Any]]:
    """The DDP workloads of stage ddp_grid (name, H, F, blocks, bucket cap MB, token counts)."""
    rows = [("mlp4096_b25", 4096, 16384, 1, 25, False, [4096]),
            ("mlp4096_b25_view", 4096, 16384, 1, 25, True, [4096]),
            ("mlp2048x4_b25", 2048, 8192, 4, 25, False, [4096, 16384]),
            ("mlp2048x4_b100", 2048, 8192, 4, 100, False, [4096, 16384]),
            ("mlp1024x8_b5", 1024, 4096, 8, 5, False, [4096, 16384]),
            ("mlp1024x8_b25", 1024, 4096, 8, 25, False, [4096, 16384])]
    if quick:
        rows = [r[:6] + ([r[6][0]],) for r in rows[2:4]]
    return [{"name": n, "hidden": h, "ffn": f, "layers": layer, "bucket_cap_mb": b, "gradient_as_bucket_view": v,
             "tokens": t} for n, h, f, layer, b, v, t in rows]


def _ddp_rank_variants(quick: bool) -> list[dict[str, Any]]:
    """Stage ddp_ranks' workloads: ddp_grid's, the calibrated one (mlp4096_b25) at 1024, 4096, 16384 tokens."""
    out = _ddp_variants(quick)
    if not quick:
        out[0] = {**out[0], "tokens": [1024, 4096, 16384]}
    return out


def _config(quick: bool, deadline: float, nccl_log: bool) -> dict[str, Any]:
    return {
        "quick": quick,
        "deadline": deadline,
        "timeout_s": 180,
        "sizes": message_sizes(quick),
        "target_ms": 1.0 if quick else 3.0,
        "target_ms_large": 5.0 if quick else 20.0,
        "n_samples": 7 if quick else 15,
        "channel_counts": [1, 4, 16] if quick else [1, 2, 4, 8, 16, 32],
        "channel_bytes": (64 << 20) if quick else (256 << 20),
        "contention_ar_bytes": (64 << 20) if quick else (256 << 20),
        "contention_window_ms": 30.0 if quick else 100.0,
        "contention_reps": 3 if quick else 5,
        # the DDP workload can be changed from the environment (a second, held-out workload)
        "ddp_hidden": int(os.environ.get("KS_DDP_HIDDEN", 4096)),
        "ddp_ffn": int(os.environ.get("KS_DDP_FFN", 16384)),
        "ddp_bucket_mb": int(os.environ.get("KS_DDP_BUCKET_MB", 25)),
        "ddp_tokens": ([int(t) for t in os.environ["KS_DDP_TOKENS"].split(",")] if os.environ.get("KS_DDP_TOKENS")
                       else [2048, 8192] if quick else [1024, 4096, 16384]),
        "ddp_steps": 8 if quick else 20,
        # contention grid: bf16 GEMMs from one wave (2048^3: 128 tiles of 128x256 on 132 SMs) to many
        # waves, DDP's weight-gradient shape, copies; x all-reduce sizes
        "grid_loads": ([["gemm", 4096, 4096, 4096], ["copy", 256 << 20]] if quick else
                       [["gemm", 2048, 2048, 2048], ["gemm", 4096, 4096, 4096], ["gemm", 8192, 8192, 8192],
                        ["gemm", 4096, 16384, 4096], ["copy", 64 << 20], ["copy", 1 << 30]]),
        "grid_ar_bytes": [16 << 20, 64 << 20] if quick else [4 << 20, 32 << 20, 256 << 20],
        "grid_one_rank_loads": [["gemm", 8192, 8192, 8192], ["copy", 1 << 30]],
        "grid_one_rank_ar_bytes": 256 << 20,
        "grid_window_ms": 20.0 if quick else 40.0,
        "grid_reps": 3 if quick else 5,
        "grid_keep_calls": 600,
        # DDP workloads held out by model and bucket cap (each weight of H=4096, F=16384 is 128 MiB: a
        # bucket of its own whatever the cap; smaller weights are where the cap decides)
        "ddp_variants": _ddp_variants(quick),
        "ddp_profile": True,
        "ddp_profile_keep": 400,
        # stage ddp_ranks: the ddp_grid workloads (the calibrated one also at 1024 and 16384 tokens) with
        # every rank's clocks, steps per mode, events kept per rank's profiled step
        "ddp_rank_variants": _ddp_rank_variants(quick),
        "ddp_rank_steps": 4 if quick else 10,
        "ddp_rank_keep": 3000,
        # stage sm_share: calibration-split GEMMs (the contention grid's and the calibrated DDP workload's
        # forward shape) started while an occupier is resident: k spin kernels, all-reduces pinned to c
        # channels (and the default group), a device copy
        "share_gemms": ([[4096, 4096, 4096], [4096, 16384, 4096]] if quick else
                        [[2048, 2048, 2048], [4096, 4096, 4096], [8192, 8192, 8192], [4096, 16384, 4096],
                         [4096, 4096, 16384], [16384, 4096, 4096]]),
        "share_spins": [4, 16] if quick else [1, 4, 8, 16],
        "share_channels": [4] if quick else [1, 4, 8, 16],
        "share_ar_bytes": 256 << 20,
        "share_copy_bytes": 1 << 30,
        "share_delay_us": 200.0,
        "share_window_us": 3000.0 if quick else 6000.0,
        "share_reps": 3,
        "stages": (os.environ["KS_COMM_STAGES"].split(",") if os.environ.get("KS_COMM_STAGES")
                   else ["check", "host", "collectives", "channels", "contention", "ddp"]),
        "nccl_log": nccl_log,
    }


def _write(out_dir: str, records: list[dict[str, Any]], errors: list[dict[str, Any]], extra: dict[str, Any],
           status: str, mode: str) -> dict[str, Any]:
    doc = common.write_group(out_dir, GROUP, records, MODULE)
    doc["meta"].update(extra)
    doc.update({"mode": mode, "status": status, "errors": errors})
    path = os.path.join(out_dir, f"{GROUP}.json")
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(doc, fh, indent=1)
    os.replace(tmp, path)
    return doc


def run(out_dir: str, quick: bool = False, world_sizes: list[int] | None = None, budget_s: float | None = None,
        nccl_log: bool = True) -> dict[str, Any]:
    multicast_off()
    import torch
    import torch.multiprocessing as mp

    t_start = time.time()
    os.makedirs(out_dir, exist_ok=True)
    n_gpus = torch.cuda.device_count()
    if n_gpus < 1:
        raise SystemExit("no CUDA device visible")
    worlds = world_sizes or world_sizes_for(n_gpus)
    bad = [w for w in worlds if w < 1 or w > n_gpus]
    if bad:
        raise SystemExit(f"world sizes {bad} exceed the {n_gpus} visible GPU(s)")
    deadline = t_start + budget_s if budget_s else float("inf")
    try:
        nccl_version: Any = ".".join(str(v) for v in torch.cuda.nccl.version())
    except Exception as exc:  # noqa: BLE001
        nccl_version = f"unavailable: {exc!r}"
    mode = "quick" if quick else "full"
    extra: dict[str, Any] = {
        "command": " ".join([sys.executable, "-m", MODULE, *sys.argv[1:]]),
        "mode": mode,
        "nccl_version": nccl_version,
        "visible_gpus": n_gpus,
        "world_sizes": worlds,
        "nodes": 1,
        "launcher": "torch.multiprocessing (spawn), one process per GPU, NCCL, MASTER_ADDR=127.0.0.1",
        "nvlink_multicast": "off (NCCL_NVLS_ENABLE=0): NCCL's NVLS all-reduce is not measured",
        "env": _env_snapshot(),
        "gpus": _run_text(["nvidia-smi", "-L"]).splitlines(),
        "nvidia_smi_topo": _run_text(["nvidia-smi", "topo", "-m"]),
        "nvlink_status": _run_text(["nvidia-smi", "nvlink", "-s"])[:4000],
        "config": {k: v for k, v in _config(quick, 0.0, False).items() if k not in ("deadline", "nccl_log")},
    }
    records: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    status = "complete"
    for w in worlds:
        if time.time() > deadline:
            errors.append({"where": f"world {w}", "error": "skipped: budget"})
            status = "partial"
            continue
        part = os.path.join(out_dir, f".comm_w{w}.json")
        log_path = os.path.join(out_dir, f".nccl_w{w}.log") if nccl_log else ""
        for p in (part, log_path):
            if p and os.path.exists(p):
                os.remove(p)
        cfg = _config(quick, deadline, bool(nccl_log))
        cfg["nccl_log"] = log_path
        common.log(f"world size {w}: spawning {w} process(es)")
        t0 = time.time()
        ctx = mp.start_processes(_worker, args=(w, _free_port(), cfg, part), nprocs=w, join=False,
                                 start_method="spawn")
        # hard stop: the budget plus a margin for shutdown, or 15 minutes for one world size
        hard = min(deadline + 60, t0 + 900)
        try:
            while not ctx.join(timeout=5):
                if time.time() > hard:
                    raise TimeoutError(f"world {w} still running after {time.time() - t0:.0f} s")
        except Exception as exc:  # noqa: BLE001 - recorded; the next world size still runs
            errors.append({"where": f"world {w}", "error": repr(exc)[:2000]})
            status = "partial"
            for proc in ctx.processes:
                if proc.is_alive():
                    proc.kill()
        if os.path.exists(part):
            with open(part) as fh:
                got = json.load(fh)
            records += got.get("records", [])
            errors += got.get("errors", [])
            os.remove(part)
        else:
            errors.append({"where": f"world {w}", "error": "rank 0 wrote no results"})
            status = "partial"
        if log_path:
            records.append({"bench": "nccl_init", "world_size": w, **parse_nccl_log(log_path)})
        records.append({"bench": "world_wall", "world_size": w, "wall_s": round(time.time() - t0, 2)})
        common.log(f"world size {w}: done in {time.time() - t0:.1f} s")
        _write(out_dir, records, errors, {**extra, "wall_s": round(time.time() - t_start, 2)}, "running", mode)
    if errors and status == "complete":
        status = "partial"
    doc = _write(out_dir, records, errors, {**extra, "wall_s": round(time.time() - t_start, 2)}, status, mode)
    common.log(f"comm: {len(records)} records, {len(errors)} errors, status {status}, "
               f"{time.time() - t_start:.1f} s -> {os.path.join(out_dir, GROUP + '.json')}")
    return doc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true", help="x16 size steps, fewer samples, shorter windows")
    ap.add_argument("--world-sizes", default="", help="comma-separated, e.g. 2,8 (default: every power of two "
                                                        "up to the visible GPUs)")
    ap.add_argument("--budget-s", type=float, default=None, help="stop starting new measurements after this")
    ap.add_argument("--no-nccl-log", action="store_true", help="do not record NCCL's INFO log of rank 0")
    ap.add_argument("--stages", default="", help="comma list of stages (default: KS_COMM_STAGES or every stage "
                                                 f"but the grids); known: {','.join(STAGES)}")
    ap.add_argument("--dry-run", action="store_true", help="print the plan (stages, grid, DDP variants) as JSON; "
                                                          "needs no GPU and no torch")
    ns = ap.parse_args()
    if ns.stages:
        bad = [x for x in ns.stages.split(",") if x not in STAGES]
        if bad:
            print(f"error: --stages: unknown stage(s) {bad}; expected some of {list(STAGES)}", file=sys.stderr)
            return 2
        os.environ["KS_COMM_STAGES"] = ns.stages
    if ns.dry_run:
        print(json.dumps(_config(ns.quick, 0.0, False), indent=1))
        return 0
    worlds = [int(w) for w in ns.world_sizes.split(",") if w.strip()] or None
    doc = run(ns.out, quick=ns.quick, world_sizes=worlds, budget_s=ns.budget_s, nccl_log=not ns.no_nccl_log)
    return 0 if doc["status"] == "complete" else 1


if __name__ == "__main__":
    raise SystemExit(main())
