"""Issue 18, fourth wave: the held-out GEMMs, copies and sums re-measured in three L2 states, and
new held-out shapes (docs/gemm_small_m.md says why).

The third wave's held-out kernels (sim.calibrate.gpu.wave3_gpu, table heldout_w3) were profiled after
an L2 flush that *writes* a 256 MB buffer: the next kernel starts with an L2 full of dirty lines whose
write-back it pays for (+3..8 us on a small-M GEMM, validation/h200/wave3/gemm_l2). A real decode or
training step reads its weights with L2 holding other, clean data. This measures every shape in:

- ``clean``: a 256 MB buffer *read* (summed into a scalar) before each call: cold and clean L2;
- ``dirty``: a 256 MB buffer written before each call (common.flush_l2, the earlier held-out sets);
- ``warm``: nothing between calls (operands stay L2-resident where they fit).

Kernels are timed device-side with torch.profiler (median per kernel position over the calls); the
flush's own kernels are dropped by count (the flush is profiled alone first), so sums being measured
are never confused with the flush's reduction.

    python3 -m sim.calibrate.gpu.heldout_l2 --out DIR [--budget-s S] [--parts LIST] [--smoke] [--dry-run]

Parts (in this order; the budget stops starting new cases, the file stays valid JSON):
- gemm_w3 / copy_w3 / sum_w3: exactly the third wave's shapes (wave3_gpu.run_gemm / run_copy / run_reduction);
- gemm_cal / sum_cal / copy_cal / row_sum_cal / norm_cal: calibration-split shapes (``set: cal``; a fit may use
  them, no held-out set has them): what a cold-L2 parameter is fitted on (row_sum_cal: few-block row sums of 20-44
  loop iterations, x.sum(1) only; norm_cal: layer norm and RMS norm forwards, fitted in every state;
  norm_bwd_cal: their backwards, clean and warm; norm_fallback_cal: layer norms over rows that are not whole
  4-element vectors, clean and warm; softmax_cal: softmax forwards on ATen's warp kernel, clean and warm;
  softmax_bwd_cal: softmax backwards, clean and warm);
- gemm_new / copy_new / sum_new / norm_bwd_new: shapes no fit, no correction table and no earlier held-out set uses
  (norm_bwd_new: layer norm and RMS norm backwards, clean and warm; softmax_bwd_new: softmax backwards, clean and
  warm);
- fused_new: the Triton bias+GELU+dropout forward at a hidden size (6144), token counts and
  warps per block (2, 16) no earlier set used, clean L2 only.

Writes DIR/heldout_l2.json (records as wave3_gpu's, plus ``l2_state`` and ``set``). stdlib + torch
(+ triton for fused_new); never changes GPU settings.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

from . import common

STATES = ("clean", "dirty", "warm")
CALLS = 7

W3_GEMM = ([(m, 2048, 2048) for m in (1, 3, 8, 24, 48)] + [(m, 8192, 2048) for m in (2, 12, 40)]
           + [(m, 2048, 8192) for m in (2, 12, 40, 96)] + [(m, 6144, 4096) for m in (4, 32)]
           + [(2048, 2049, 2048), (2048, 2048, 2052), (1536, 3000, 2048), (4096, 6000, 1000)])
# off the calibration grid (M 1/8/16/64/128/256/512/1024.., N,K powers of two 1024..16384, the
# misaligned set at M 1000/3000/4096) and off the earlier held-out sets
NEW_GEMM = ([(m, 5120, 5120) for m in (1, 4, 24, 96)] + [(m, 13824, 5120) for m in (2, 12)]
            + [(m, 5120, 13824) for m in (2, 12)] + [(m, 3072, 3072) for m in (6, 40)]
            + [(5, 12288, 3072), (20, 3072, 12288), (192, 4096, 4096), (320, 2048, 8192)]
            + [(512, 3000, 2048), (2500, 4100, 1500), (1200, 1200, 1200), (3072, 5120, 2560)])
W3_COPY_KIB = [12, 48, 96, 384, 768, 1536, 3072, 6144]
NEW_COPY_KIB = [2, 24, 200, 640, 2560, 10240, 20480]
W3_SUM = [(r, c) for r in (24, 48, 96, 192, 384, 768, 3072, 12288) for c in (2048, 6144)]
NEW_SUM = [(r, c) for r in (32, 128, 512, 2048, 6144) for c in (1024, 3072, 8192)]
# calibration-split shapes (a fit may use these; no held-out set has them): the GEMM grid's small-M
# points, the copy fit's sizes, sums at row counts and widths no held-out set uses
CAL_GEMM = [(1, 8192, 4096), (16, 8192, 4096), (1, 4096, 8192), (16, 4096, 8192), (1, 16384, 2048),
            (16, 2048, 16384), (1, 2048, 2048), (16, 8192, 8192), (64, 8192, 8192), (8, 16384, 4096),
            (16, 1024, 16384), (1, 16384, 16384)]
CAL_COPY_KIB = [8, 16, 32, 64, 65536, 131072]
CAL_SUM = [(r, 4096) for r in (12, 40, 160, 640, 2560, 10240)] + [(r, 1024) for r in (20, 80, 320, 1280, 5120)]
# calibration-split row sums (x.sum(1) only) on 2-4 blocks with 20, 36 and 44 loop iterations (vec path, 512
# threads): chains of dependent HBM round trips long enough to separate reduce_kernel.iter_ns_vec_cold from the
# loop's entry (CAL_SUM's training-split row sums are two 8-iteration chains and two grids of 160+ blocks, so
# iteration and entry traded off: 155 ns fitted vs 213 ns per iteration measured on few-block row sums, issue 16).
# Shapes no held-out set uses (W3_SUM, NEW_SUM) and on the training side of sim.calibrate.raw.held_out.
CAL_ROW_SUM = [(28, 2560), (56, 4608), (44, 5632)]
# calibration-split layer norm and RMS norm forwards (F.layer_norm, F.rms_norm; ATen's vectorized kernel) over the
# calibration's row counts and powers-of-two widths (the reduction group's layer norms), bf16, in every state: what
# profile layer_norm_kernel is fitted on. The held-out sets (heldout_kernels, validation/h200/norm_heldout) use
# other row counts.
# calibration-split layer norm backwards (torch.autograd.grad of torch.layer_norm's output for x, weight and bias:
# ATen's grad-input kernel, a block per row, then the gamma/beta column sums) over the forward's grid plus 128-row
# cases (few blocks per SM: the loop's round trip alone), bf16, clean and warm; and RMS norm backwards of the same
# shapes (recorded; no fit uses them yet). The held-out sets (heldout_kernels A/C, machine F) use rows 256, 1024,
# 4096, 16384, 65536.
CAL_NORM_BWD = [(r, c) for r in (128, 512, 2048, 8192, 32768) for c in (1024, 2048, 4096, 8192)]
# held-out layer norm and RMS norm backwards (set new): row counts and widths no fit and no other held-out set uses
# (wave 2 has layer norm backwards at 256..65536 rows of 1024..8192 after a dirtying flush, no RMS norm backward)
NEW_NORM_BWD = [(r, c) for r in (384, 3072, 12288) for c in (1536, 3072, 5120)]
# calibration-split layer norm forwards whose rows are not whole 4-element vectors (ATen's two-kernel fallback:
# RowwiseMomentsCUDAKernel, then LayerNormForwardCUDAKernel), bf16, clean and warm. The held-out set
# (validation/h200/norm_heldout) has 3072 and 12288 rows of 1030 and 4098 columns.
CAL_NORM_FALLBACK = [(r, c) for r in (256, 1024, 4096, 16384) for c in (770, 2050, 6146)]
CAL_NORM = [(r, c) for r in (512, 2048, 8192, 32768) for c in (1024, 2048, 4096, 8192)]
# calibration-split softmax forwards over the last dimension that run ATen's persistent warp kernel (rows of up to
# 2048 elements and 8192 bytes: softmax_warp_forward), clean and warm: what profile softmax_kernel's warp_* keys are
# fitted on. bf16 rows of 128 (two rows a warp), 384, 640, 1024 and 2048 elements and fp32 rows of 640 and 2048, at
# row counts from a fraction of one wave to many. The held-out sets use other row counts and lengths
# (validation/h200/softmax_heldout: 384, 3072, 12288, 24576 rows of 256, 512, 768, 1536; heldout_kernels: 256 ..
# 65536 rows of 1024).
CAL_SOFTMAX = ([("bfloat16", c, r) for c in (128, 384, 640, 1024, 2048) for r in (160, 1280, 8192, 49152)]
               + [("float32", c, r) for c in (640, 2048) for r in (160, 1280, 8192, 49152)])

# softmax backwards over the last dimension (aten._softmax_backward_data, what autograd runs: ATen's elementwise
# grad * output, then the backward kernel ATen picks for the row -- the persistent warp kernel for short rows,
# cunn_SoftMaxBackwardSmem while the row fits the shared memory, cunn_SoftMaxBackward above), clean and warm.
# Calibration split (set cal): what profile softmax_kernel's backward keys are fitted on; bf16 rows of 128 to 32768
# elements and fp32 rows of 640 to 6144, at the forward calibration's row counts. Held out (set new): row counts
# and lengths no fit and no other held-out set uses (wave 2's softmax backwards: 256 .. 65536 rows of 1024, 4096,
# 8192 after a dirtying flush).
CAL_SOFTMAX_BWD = ([("bfloat16", c, r) for c in (128, 384, 640, 1024, 1536, 2048, 3072, 6144, 12288, 32768)
                    for r in (160, 1280, 8192, 49152)]
                   + [("float32", c, r) for c in (640, 1024, 2048, 6144) for r in (160, 1280, 8192, 49152)])
NEW_SOFTMAX_BWD = ([("bfloat16", c, r) for c in (256, 768, 1536, 2560, 5120, 10240) for r in (384, 3072, 24576)]
                   + [("float32", c, r) for c in (512, 3072) for r in (384, 3072, 24576)])

_CLEAN_BUF: Any = None
_SINK: Any = None


def _prep(state: str) -> Callable[[], None]:
    """What runs before each profiled call in `state`."""
    import torch

    global _CLEAN_BUF, _SINK
    if state == "dirty":
        return common.flush_l2
    if state == "clean":
        if _CLEAN_BUF is None:
            _CLEAN_BUF = torch.ones(common.FLUSH_BYTES // 4, dtype=torch.float32, device="cuda")
            _SINK = torch.empty((), dtype=torch.float32, device="cuda")

        def clean() -> None:
            torch.sum(_CLEAN_BUF, dim=0, out=_SINK)
        return clean
    return lambda: None


def _events(fn: Callable[[], None]) -> list[dict[str, Any]]:
    import torch
    from torch.profiler import ProfilerActivity, profile

    from .trace_utils import export_trace, gpu_events

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return gpu_events(export_trace(prof))  # in start order


_FLUSH_COUNT: dict[str, int] = {}


def profiled_state(fn: Callable[[], Any], state: str, calls: int = CALLS) -> dict[str, Any]:
    """Kernels of one call of fn after `state`'s preparation: median duration per kernel position."""
    import torch

    prep = _prep(state)
    if state not in _FLUSH_COUNT:
        prep()
        _FLUSH_COUNT[state] = len(_events(prep))
    nf = _FLUSH_COUNT[state]
    fn()  # warm-up (cuBLAS heuristics, Triton compile, allocator)

    def loop() -> None:
        for _ in range(calls):
            prep()
            torch.cuda.synchronize()
            fn()
    ev = _events(loop)
    group = len(ev) // calls
    np_ = group - nf
    if np_ <= 0 or len(ev) != calls * group:
        return {"kernels": [{"name": str(e.get("name") or "")[:160], "duration_us": e["duration_us"]} for e in ev],
                "uneven_calls": True, "flush_kernels": nf}
    out = []
    for j in range(np_):
        grp = [ev[i * group + nf + j] for i in range(calls)]
        e = grp[0]
        out.append({"name": str(e.get("name") or "")[:160],
                    "duration_us": statistics.median(float(g["duration_us"]) for g in grp),
                    "duration_samples_us": [round(float(g["duration_us"]), 3) for g in grp], "grid": e.get("grid"),
                    "block": e.get("block"), "registers_per_thread": e.get("registers_per_thread"),
                    "shared_memory_bytes": e.get("shared_memory_bytes"), "kind": e.get("kind")})
    return {"kernels": out, "flush_kernels": nf}


class L2Ctx(common.BudgetedAttempts):
    def __init__(self, out: str, smoke: bool, budget_s: float, group: str = "heldout_l2",
                 states: tuple[str, ...] = STATES, meta: dict[str, Any] | None = None) -> None:
        """Records go to OUT/<group>.json (group heldout_l2 here; sim.calibrate.gpu.l2_cold writes the
        calibration-split parts as group l2_cold), each case measured in `states`."""
        self.smoke = smoke
        self.states = states
        super().__init__(common.ResultFile(os.path.join(out, f"{group}.json"), group,
                                           common.collect_meta({"mode": "smoke" if smoke else "full",
                                                                "states": list(states), "calls": CALLS,
                                                                **(meta or {})})), budget_s)


def _gemm(c: L2Ctx, shapes: list[tuple[int, int, int]], tag: str) -> None:
    import torch

    for m, n, k in shapes[:1] if c.smoke else shapes:
        def one(m: int = m, n: int = n, k: int = k) -> None:
            a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
            o = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
            for st in c.states:
                r = profiled_state(lambda: torch.mm(a, b, out=o), st)
                c.rf.add({"bench": "gemm", "set": tag, "l2_state": st, "m": m, "n": n, "k": k, "dtype": "bfloat16",
                          "layout": "nn", "flops": 2.0 * m * n * k, **r})
            common.log(f"gemm {tag} {m}x{n}x{k}: " + " ".join(
                f"{rec['l2_state']} {sum(x['duration_us'] for x in rec['kernels']):.2f}"
                for rec in c.rf.doc["records"][-len(c.states):]))
        c.attempt(f"gemm {tag} {m}x{n}x{k}", one)


def _copy(c: L2Ctx, kibs: list[int], tag: str) -> None:
    import torch

    for kib in kibs[:1] if c.smoke else kibs:
        def one(kib: int = kib) -> None:
            n = kib * 1024 // 2
            src = torch.randn(n, device="cuda", dtype=torch.bfloat16)
            dst = torch.empty_like(src)
            for st in c.states:
                c.rf.add({"bench": "copy", "set": tag, "l2_state": st, "impl": "torch_copy_", "numel": n,
                          "bytes": 2 * n * 2, "dtype": "bfloat16", "tensor_bytes": 2 * n,
                          **profiled_state(lambda: dst.copy_(src), st)})
        c.attempt(f"copy {tag} {kib} KiB", one)


def _sum(c: L2Ctx, cases: list[tuple[int, int]], tag: str) -> None:
    """x.sum(0) and x.sum(1) of each (rows, cols) bf16 case, in every state."""
    _sums(c, cases, tag, (0, 1))


def _row_sum(c: L2Ctx, cases: list[tuple[int, int]], tag: str) -> None:
    """x.sum(1) only (a row sum) of each (rows, cols) bf16 case, in every state."""
    _sums(c, cases, tag, (1,))


def _sums(c: L2Ctx, cases: list[tuple[int, int]], tag: str, dims: tuple[int, ...]) -> None:
    import torch

    for rows, cols in cases[:1] if c.smoke else cases:
        def one(rows: int = rows, cols: int = cols) -> None:
            x = torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16)
            for dim in dims:
                for st in c.states:
                    c.rf.add({"bench": "sum", "set": tag, "l2_state": st, "dim": dim, "rows": rows, "cols": cols,
                              "dtype": "bfloat16", **profiled_state(functools.partial(x.sum, dim), st)})
        c.attempt(f"sum {tag} {rows}x{cols}", one)


def _norm(c: L2Ctx, cases: list[tuple[int, int]], tag: str) -> None:
    """F.layer_norm (weight and bias) and F.rms_norm (weight) of each (rows, cols) bf16 case under no_grad, in
    every state."""
    import torch

    for rows, cols in cases[:1] if c.smoke else cases:
        def one(rows: int = rows, cols: int = cols) -> None:
            x = torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16)
            w = torch.randn(cols, device="cuda", dtype=torch.bfloat16)
            b = torch.randn(cols, device="cuda", dtype=torch.bfloat16)
            # torch.layer_norm / torch.rms_norm: what F.layer_norm / F.rms_norm call
            fns = {"layer_norm_fwd": lambda: torch.layer_norm(x, (cols,), w, b),
                   "rms_norm_fwd": lambda: torch.rms_norm(x, (cols,), w)}
            with torch.no_grad():
                for op, fn in fns.items():
                    for st in c.states:
                        c.rf.add({"bench": "norm", "op": op, "set": tag, "l2_state": st, "rows": rows, "cols": cols,
                                  "dtype": "bfloat16", **profiled_state(fn, st)})
        c.attempt(f"norm {tag} {rows}x{cols}", one)


def _norm_bwd(c: L2Ctx, cases: list[tuple[int, int]], tag: str, bench: str = "norm") -> None:
    """The backward of torch.layer_norm (weight and bias) and of torch.rms_norm (weight) of each (rows, cols) bf16
    case: torch.autograd.grad of the output for the input and the parameters, in the clean and warm states (records
    of `bench`: norm for the calibration's, reduction for a held-out set's, as the held-out readers take them)."""
    import torch

    for rows, cols in cases[:1] if c.smoke else cases:
        def one(rows: int = rows, cols: int = cols) -> None:
            x = torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            w = torch.randn(cols, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            b = torch.randn(cols, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            gy = torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16)
            y_ln = torch.layer_norm(x, (cols,), w, b)
            y_rms = torch.rms_norm(x, (cols,), w)
            fns = {"layer_norm_bwd": lambda: torch.autograd.grad(y_ln, (x, w, b), gy, retain_graph=True),
                   "rms_norm_bwd": lambda: torch.autograd.grad(y_rms, (x, w), gy, retain_graph=True)}
            for op, fn in fns.items():
                for st in [s for s in c.states if s in ("clean", "warm")]:
                    c.rf.add({"bench": bench, "op": op, "set": tag, "l2_state": st, "rows": rows, "cols": cols,
                              "dtype": "bfloat16", **profiled_state(fn, st)})
            common.log(f"norm_bwd {tag} {rows}x{cols}: " + " ".join(
                f"{rec['op'][:3]}/{rec['l2_state']} {sum(k['duration_us'] for k in rec['kernels']):.2f}"
                for rec in c.rf.doc["records"][-2 * len(fns):]))
        c.attempt(f"norm_bwd {tag} {rows}x{cols}", one)


def _norm_fallback(c: L2Ctx, cases: list[tuple[int, int]], tag: str) -> None:
    """torch.layer_norm (weight and bias) under no_grad over rows of a length that is not whole 4-element vectors,
    in the clean and warm states."""
    import torch

    for rows, cols in cases[:1] if c.smoke else cases:
        def one(rows: int = rows, cols: int = cols) -> None:
            x = torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16)
            w = torch.randn(cols, device="cuda", dtype=torch.bfloat16)
            b = torch.randn(cols, device="cuda", dtype=torch.bfloat16)
            with torch.no_grad():
                for st in [s for s in c.states if s in ("clean", "warm")]:
                    c.rf.add({"bench": "norm", "op": "layer_norm_fwd", "set": tag, "l2_state": st, "rows": rows,
                              "cols": cols, "dtype": "bfloat16",
                              **profiled_state(lambda: torch.layer_norm(x, (cols,), w, b), st)})
            common.log(f"norm_fallback {tag} {rows}x{cols}: " + " ".join(
                f"{rec['l2_state']} {sum(k['duration_us'] for k in rec['kernels']):.2f}"
                for rec in c.rf.doc["records"][-2:]))
        c.attempt(f"norm_fallback {tag} {rows}x{cols}", one)


def _softmax_cal(c: L2Ctx, cases: list[tuple[str, int, int]], tag: str) -> None:
    """torch.softmax over the last dimension of each (dtype, cols, rows) case, in the clean and warm states."""
    import torch

    for dtype, cols, rows in cases[:1] if c.smoke else cases:
        def one(dtype: str = dtype, cols: int = cols, rows: int = rows) -> None:
            x = torch.randn(rows, cols, device="cuda", dtype=getattr(torch, dtype))
            for st in [s for s in c.states if s in ("clean", "warm")]:
                c.rf.add({"bench": "reduction", "op": "softmax_fwd", "set": tag, "l2_state": st, "rows": rows,
                          "cols": cols, "dtype": dtype, **profiled_state(lambda: torch.softmax(x, dim=-1), st)})
            common.log(f"softmax {tag} {dtype} {rows}x{cols}: " + " ".join(
                f"{rec['l2_state']} {sum(k['duration_us'] for k in rec['kernels']):.2f}"
                for rec in c.rf.doc["records"][-2:]))
        c.attempt(f"softmax {tag} {dtype} {rows}x{cols}", one)


def _softmax_bwd(c: L2Ctx, cases: list[tuple[str, int, int]], tag: str) -> None:
    """aten._softmax_backward_data over the last dimension of each (dtype, cols, rows) case (autograd's call for
    torch.softmax), in the clean and warm states."""
    import torch

    for dtype, cols, rows in cases[:1] if c.smoke else cases:
        def one(dtype: str = dtype, cols: int = cols, rows: int = rows) -> None:
            dt = getattr(torch, dtype)
            y = torch.softmax(torch.randn(rows, cols, device="cuda", dtype=dt), dim=-1)
            gy = torch.randn(rows, cols, device="cuda", dtype=dt)
            for st in [s for s in c.states if s in ("clean", "warm")]:
                c.rf.add({"bench": "reduction", "op": "softmax_bwd", "set": tag, "l2_state": st, "rows": rows,
                          "cols": cols, "dtype": dtype,
                          **profiled_state(lambda: torch.ops.aten._softmax_backward_data(gy, y, -1, dt), st)})
            common.log(f"softmax_bwd {tag} {dtype} {rows}x{cols}: " + " ".join(
                f"{rec['l2_state']} " + "+".join(f"{k['duration_us']:.2f}" for k in rec["kernels"])
                for rec in c.rf.doc["records"][-2:]))
        c.attempt(f"softmax_bwd {tag} {dtype} {rows}x{cols}", one)


def _fused(c: L2Ctx) -> None:
    import torch

    from . import triton_kernels as K

    hidden, p = 6144, 0.1
    for tokens in ([32] if c.smoke else [32, 512, 2048]):
        numel = hidden * tokens
        h = torch.randn(numel, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(hidden, device="cuda", dtype=torch.bfloat16)
        y = torch.empty_like(h)
        for BLOCK in ([1024] if c.smoke else [1024, 4096, 8192, 16384]):
            for num_warps in ((2,) if c.smoke else (2, 16)):
                def one(BLOCK: int = BLOCK, num_warps: int = num_warps, tokens: int = tokens, h: Any = h,
                        b: Any = b, y: Any = y, numel: int = numel) -> None:
                    ck, grid = K.launch_bgd_fwd(h, b, y, p, 7, BLOCK=BLOCK, num_warps=num_warps)
                    r = profiled_state(lambda: K.launch_bgd_fwd(h, b, y, p, 7, BLOCK=BLOCK, num_warps=num_warps),
                                       "clean")
                    t = sum(float(x["duration_us"]) for x in r["kernels"])
                    c.rf.add({"bench": "fused_bgd", "set": "new", "l2_state": "clean", "timing": "profiled",
                              "kernel": "bias_gelu_dropout_fwd", "tokens": tokens, "hidden": hidden, "numel": numel,
                              "dtype": "bfloat16", "p": p, "BLOCK": BLOCK, "num_warps": num_warps,
                              "elements_per_thread": BLOCK / (32 * num_warps), "grid": list(grid),
                              "bytes": 4 * numel + 2 * hidden, "time_us": t, **common.triton_kernel_info(ck), **r})
                    common.log(f"fused T={tokens} B={BLOCK} w={num_warps}: {t:.2f} us")
                c.attempt(f"fused T={tokens} B={BLOCK} w={num_warps}", one)
    common.log("fused done")


PARTS: dict[str, Callable[[L2Ctx], None]] = {
    "gemm_w3": lambda c: _gemm(c, W3_GEMM, "w3"),
    "copy_w3": lambda c: _copy(c, W3_COPY_KIB, "w3"),
    "sum_w3": lambda c: _sum(c, W3_SUM, "w3"),
    "gemm_cal": lambda c: _gemm(c, CAL_GEMM, "cal"),
    "sum_cal": lambda c: _sum(c, CAL_SUM, "cal"),
    "copy_cal": lambda c: _copy(c, CAL_COPY_KIB, "cal"),
    "row_sum_cal": lambda c: _row_sum(c, CAL_ROW_SUM, "cal"),
    "norm_cal": lambda c: _norm(c, CAL_NORM, "cal"),
    "norm_bwd_cal": lambda c: _norm_bwd(c, CAL_NORM_BWD, "cal"),
    "norm_fallback_cal": lambda c: _norm_fallback(c, CAL_NORM_FALLBACK, "cal"),
    "softmax_cal": lambda c: _softmax_cal(c, CAL_SOFTMAX, "cal"),
    "softmax_bwd_cal": lambda c: _softmax_bwd(c, CAL_SOFTMAX_BWD, "cal"),
    "gemm_new": lambda c: _gemm(c, NEW_GEMM, "new"),
    "norm_bwd_new": lambda c: _norm_bwd(c, NEW_NORM_BWD, "new", bench="reduction"),
    "softmax_bwd_new": lambda c: _softmax_bwd(c, NEW_SOFTMAX_BWD, "new"),
    "copy_new": lambda c: _copy(c, NEW_COPY_KIB, "new"),
    "sum_new": lambda c: _sum(c, NEW_SUM, "new"),
    "fused_new": _fused,
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--smoke", action="store_true", help="one case per part")
    ap.add_argument("--budget-s", type=float, default=150.0, help="no new case starts after this many seconds")
    ap.add_argument("--parts", default=",".join(PARTS))
    ap.add_argument("--dry-run", action="store_true", help="parse the arguments and print the plan; no GPU")
    ns = ap.parse_args(argv)
    parts = [p for p in ns.parts.split(",") if p]
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        print(f"error: --parts: unknown part '{unknown[0]}' (expected some of {', '.join(PARTS)})")
        return 2
    if ns.budget_s <= 0:
        print(f"error: --budget-s: {ns.budget_s} (expected a positive number of seconds)")
        return 2
    if ns.dry_run:
        n = {"gemm_w3": len(W3_GEMM), "copy_w3": len(W3_COPY_KIB), "sum_w3": 2 * len(W3_SUM),
             "gemm_new": len(NEW_GEMM), "copy_new": len(NEW_COPY_KIB), "sum_new": 2 * len(NEW_SUM), "fused_new": 24,
             "gemm_cal": len(CAL_GEMM), "copy_cal": len(CAL_COPY_KIB), "sum_cal": 2 * len(CAL_SUM),
             "row_sum_cal": len(CAL_ROW_SUM), "norm_cal": 2 * len(CAL_NORM),
             "norm_bwd_cal": 2 * len(CAL_NORM_BWD), "norm_fallback_cal": len(CAL_NORM_FALLBACK),
             "softmax_cal": len(CAL_SOFTMAX), "norm_bwd_new": 2 * len(NEW_NORM_BWD),
             "softmax_bwd_cal": len(CAL_SOFTMAX_BWD), "softmax_bwd_new": len(NEW_SOFTMAX_BWD)}
        print(f"parts {parts}; cases {sum(n[p] for p in parts)} x states {list(STATES)}; "
              f"budget {ns.budget_s} s; out {ns.out}")
        return 0
    os.makedirs(ns.out, exist_ok=True)
    measure(L2Ctx(ns.out, ns.smoke, ns.budget_s), parts)
    return 0


def measure(c: L2Ctx, parts: list[str]) -> None:
    """Warm the GPU, run `parts` in order within c's budget and close c's file."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    common.warm_gpu(1.0)
    for name in parts:
        t0 = time.time()
        c.attempt(name, functools.partial(PARTS[name], c))
        common.log(f"part {name}: {time.time() - t0:.1f} s")
    c.rf.close("truncated" if c.rf.doc.get("truncated") else "complete")


if __name__ == "__main__":
    raise SystemExit(main())
