"""Kernels at shapes and configurations no calibration group measures (issue 18's held-out set).

    python3 -m sim.calibrate.gpu.heldout_kernels --out DIR [--smoke] [--budget-s S]

Writes DIR/heldout_kernels.json (records with `bench` in the list below). Timing: `bench`
records use common.bench (CUDA events per repetition, L2 flushed before each, median);
`profiled` records time the kernels themselves with torch.profiler over 5 calls (median per
kernel position) and carry each kernel's name, grid, block, registers and shared memory.

- fused_bgd: the Triton bias+GELU+dropout forward (and backward) at hidden 4096/8192, tokens
  16..4096, BLOCK 1024..16384, 4 or 8 warps: registers, spills, time (register pressure
  without spills, small grids with 1-2 blocks per SM).
- attention: F.scaled_dot_product_attention forward and forward+backward, head_dim 64/128,
  causal or not, (batch, heads, seq) from (32, 8, 256) to (1, 32, 8192); the kernel names.
- reduction: layer_norm fwd/bwd, rms_norm fwd, softmax fwd/bwd (profiled) over rows 256..65536 x
  cols 1024/4096/8192; column sums x.sum(0) and row sums at 16..1024 rows.
- gemm: small M (1..64) at 4096x4096 and 4096x11008, odd N/K (4097, 4100, 5000, 3000).
- copy: torch copy_ from 4 KiB to 4 MiB (profiled).
- math: a Triton kernel applying one math op K times per element (K 1, 4, 16; fp32 math, bf16 io)
  for sin, cos, tanh, exp, log, sqrt, rsqrt, sigmoid, silu, pow, erf; and the eager torch op on
  bf16 (profiled).
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

from . import common


def profiled(fn: Callable[[], Any], calls: int = 5) -> list[dict[str, Any]]:
    """Kernels of one call of fn: median duration per kernel position over `calls` calls."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from .trace_utils import export_trace, gpu_events

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            common.flush_l2()
            torch.cuda.synchronize()
            fn()
        torch.cuda.synchronize()
    # drop the L2 flush kernels (a fill of int32) and split the rest into equal call groups
    ev = [e for e in gpu_events(export_trace(prof)) if "FillFunctor<int>" not in (e["name"] or "")]
    per_call = len(ev) // calls if calls else 0
    if per_call == 0 or per_call * calls != len(ev):
        return [{"name": (e["name"] or "")[:160], "duration_us": e["duration_us"], "grid": e.get("grid"),
                 "block": e.get("block"), "registers_per_thread": e.get("registers_per_thread"),
                 "shared_memory_bytes": e.get("shared_memory_bytes"), "uneven_calls": True} for e in ev]
    out = []
    for j in range(per_call):
        group = [ev[i * per_call + j] for i in range(calls)]
        e = group[0]
        out.append({"name": (e["name"] or "")[:160], "duration_us": statistics.median(g["duration_us"] for g in group),
                    "duration_samples_us": [round(g["duration_us"], 3) for g in group], "grid": e.get("grid"),
                    "block": e.get("block"), "registers_per_thread": e.get("registers_per_thread"),
                    "shared_memory_bytes": e.get("shared_memory_bytes"), "kind": e["kind"]})
    return out


class Ctx(common.BudgetedAttempts):
    def __init__(self, out: str, smoke: bool, budget_s: float, group: str = "heldout_kernels") -> None:
        self.smoke = smoke
        super().__init__(common.ResultFile(os.path.join(out, f"{group}.json"), group,
                                           common.collect_meta({"mode": "smoke" if smoke else "full"})), budget_s)
        self.kw = ({"warmup_ms": 1.0, "rep_ms": 3.0, "min_reps": 3, "max_reps": 5} if smoke
                   else {"warmup_ms": 5.0, "rep_ms": 25.0, "min_reps": 10, "max_reps": 50})

    def bench(self, fn: Callable[[int], Any], flush: bool = True) -> dict[str, Any]:
        return common.bench(fn, flush=flush, **self.kw)


def run_fused(c: Ctx) -> None:
    import torch

    from . import triton_kernels as K

    hiddens = [4096] if c.smoke else [4096, 8192]
    tokens_list = [64, 1024] if c.smoke else [16, 64, 256, 1024, 4096]
    blocks = [1024, 8192] if c.smoke else [1024, 2048, 4096, 8192, 16384]
    p = 0.1
    for hidden in hiddens:
        for tokens in tokens_list:
            numel = hidden * tokens
            h = torch.randn(numel, device="cuda", dtype=torch.bfloat16)
            b = torch.randn(hidden, device="cuda", dtype=torch.bfloat16)
            y = torch.empty_like(h)
            gy = torch.randn_like(h)
            for BLOCK in blocks:
                for num_warps in (4, 8):
                    def one(BLOCK: int = BLOCK, num_warps: int = num_warps, h: Any = h, b: Any = b, y: Any = y,
                            gy: Any = gy, tokens: int = tokens, hidden: int = hidden, numel: int = numel) -> None:
                        for kern in ("bias_gelu_dropout_fwd", "bias_gelu_dropout_bwd"):
                            if kern.endswith("fwd"):
                                ck, grid = K.launch_bgd_fwd(h, b, y, p, 7, BLOCK=BLOCK, num_warps=num_warps)
                                r = c.bench(lambda i: K.launch_bgd_fwd(h, b, y, p, 7, BLOCK=BLOCK, num_warps=num_warps))
                                nbytes = 4 * numel + 2 * hidden
                            else:
                                ck, grid = K.launch_bgd_bwd(gy, h, b, y, p, 7, BLOCK=BLOCK, num_warps=num_warps)
                                r = c.bench(lambda i: K.launch_bgd_bwd(gy, h, b, y, p, 7, BLOCK=BLOCK, num_warps=num_warps))
                                nbytes = 6 * numel + 2 * hidden
                            c.rf.add({"bench": "fused_bgd", "kernel": kern, "tokens": tokens, "hidden": hidden,
                                      "numel": numel, "dtype": "bfloat16", "p": p, "BLOCK": BLOCK,
                                      "num_warps": num_warps, "elements_per_thread": BLOCK / (32 * num_warps),
                                      "grid": list(grid), "bytes": nbytes, **common.triton_kernel_info(ck), **r})
                    c.attempt(f"fused_bgd h={hidden} T={tokens} B={BLOCK} w={num_warps}", one)
    common.log(f"fused_bgd done ({len(c.rf.doc['records'])} records)")


# The SDPA shapes (batch, heads, seq) the default-backend attention fit uses (raw group
# attention_default, measured by sim.calibrate.gpu.fit_groups); the other shapes stay held out.
ATTENTION_FIT_SHAPES = ((32, 8, 256), (4, 16, 2048), (1, 32, 8192))


def run_attention(c: Ctx, shapes: Any = None) -> None:
    import torch
    import torch.nn.functional as F

    if shapes is None:
        shapes = [(4, 16, 1024)] if c.smoke else [(32, 8, 256), (16, 8, 512), (8, 16, 1024), (4, 16, 2048),
                                                   (2, 32, 4096), (1, 32, 8192)]
    for B, H, S in shapes:
        for dh in (64, 128):
            for causal in (True, False):
                def one(B: int = B, H: int = H, S: int = S, dh: int = dh, causal: bool = causal) -> None:
                    q, k, v = (torch.randn(B, H, S, dh, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                               for _ in range(3))
                    go = torch.randn(B, H, S, dh, device="cuda", dtype=torch.bfloat16)
                    fwd = lambda i=0: F.scaled_dot_product_attention(q, k, v, is_causal=causal)  # noqa: E731
                    o = fwd()
                    bwd = lambda i=0: torch.autograd.grad(o, (q, k, v), go, retain_graph=True)  # noqa: E731
                    flops = 4.0 * B * H * S * S * dh * (0.5 if causal else 1.0)
                    for phase, fn, fl in (("fwd", fwd, flops), ("bwd", bwd, 2.5 * flops)):
                        r = c.bench(fn)
                        kern = profiled(fn, calls=3)
                        c.rf.add({"bench": "attention", "phase": phase, "batch": B, "heads": H, "seq": S,
                                  "head_dim": dh, "causal": causal, "dtype": "bfloat16", "flops": fl, **r,
                                  "tflops": fl / (r["time_us"] * 1e-6) / 1e12, "kernels": kern,
                                  "kernel_sum_us": sum(k["duration_us"] for k in kern)})
                c.attempt(f"attention {B}x{H}x{S}x{dh} causal={causal}", one)
    common.log("attention done")


def run_reduction(c: Ctx) -> None:
    import torch
    import torch.nn.functional as F

    bf = torch.bfloat16
    rows_list = [256, 4096] if c.smoke else [256, 1024, 4096, 16384, 65536]
    cols_list = [4096] if c.smoke else [1024, 4096, 8192]
    for rows in rows_list:
        for cols in cols_list:
            def one(rows: int = rows, cols: int = cols) -> None:
                x = torch.randn(rows, cols, device="cuda", dtype=bf, requires_grad=True)
                w = torch.randn(cols, device="cuda", dtype=bf, requires_grad=True)
                gy = torch.randn(rows, cols, device="cuda", dtype=bf)
                y = F.layer_norm(x, (cols,), w, w)
                ys = torch.softmax(x, -1)
                cases = {
                    "layer_norm_fwd": lambda: F.layer_norm(x, (cols,), w, w),
                    "layer_norm_bwd": lambda: torch.autograd.grad(y, (x, w), gy, retain_graph=True),
                    "rms_norm_fwd": lambda: F.rms_norm(x, (cols,), w),
                    "softmax_fwd": lambda: torch.softmax(x, -1),
                    "softmax_bwd": lambda: torch.autograd.grad(ys, x, gy, retain_graph=True),
                }
                for name, fn in cases.items():
                    c.rf.add({"bench": "reduction", "op": name, "rows": rows, "cols": cols, "dtype": "bfloat16",
                              "kernels": profiled(fn)})
            c.attempt(f"reduction {rows}x{cols}", one)
    for rows in ([64] if c.smoke else [16, 64, 256, 1024]):
        for cols in ([4096] if c.smoke else [4096, 16384]):
            def sums(rows: int = rows, cols: int = cols) -> None:
                x = torch.randn(rows, cols, device="cuda", dtype=bf)
                for name, fn in (("sum_dim0", lambda: x.sum(0)), ("sum_dim1", lambda: x.sum(1))):
                    c.rf.add({"bench": "reduction", "op": name, "rows": rows, "cols": cols, "dtype": "bfloat16",
                              "kernels": profiled(fn)})
            c.attempt(f"sums {rows}x{cols}", sums)
    common.log("reductions done")


def run_gemm(c: Ctx) -> None:
    import torch

    shapes = [(16, 4096, 4096), (4096, 4097, 4096)] if c.smoke else (
        [(m, 4096, 4096) for m in (1, 2, 4, 8, 16, 32, 64)] + [(m, 11008, 4096) for m in (1, 16, 64)]
        + [(4096, 4097, 4096), (4096, 4096, 4100), (3000, 5000, 3000), (8192, 4097, 4096), (2048, 5000, 4097),
           (1000, 4096, 4096), (777, 1024, 4096)])
    l2 = 60 << 20
    for m, n, k in shapes:
        def one(m: int = m, n: int = n, k: int = k) -> None:
            set_bytes = (m * k + k * n + m * n) * 2
            n_sets = max(1, min(8, math.ceil(3 * l2 / set_bytes)))
            sets = [(torch.randn(m, k, device="cuda", dtype=torch.bfloat16),
                     torch.randn(k, n, device="cuda", dtype=torch.bfloat16),
                     torch.empty(m, n, device="cuda", dtype=torch.bfloat16)) for _ in range(n_sets)]

            def fn(i: int) -> None:
                a, b, o = sets[i % n_sets]
                torch.mm(a, b, out=o)
            r = c.bench(fn, flush=False)
            a, b, o = sets[0]
            kern = profiled(lambda: torch.mm(a, b, out=o), calls=3)
            flops = 2.0 * m * n * k
            c.rf.add({"bench": "gemm", "m": m, "n": n, "k": k, "dtype": "bfloat16", "layout": "nn",
                      "input_sets": n_sets, "bytes_min": set_bytes, "flops": flops, **r,
                      "tflops": flops / (r["time_us"] * 1e-6) / 1e12, "kernels": kern})
        c.attempt(f"gemm {m}x{n}x{k}", one)
    common.log("gemm done")


def run_copy(c: Ctx) -> None:
    import torch

    for kib in ([4, 1024] if c.smoke else [4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096]):
        def one(kib: int = kib) -> None:
            n = kib * 1024 // 2
            src = torch.randn(n, device="cuda", dtype=torch.bfloat16)
            dst = torch.empty_like(src)
            c.rf.add({"bench": "copy", "impl": "torch_copy_", "numel": n, "bytes": 2 * n * 2, "dtype": "bfloat16",
                      "tensor_bytes": 2 * n, "kernels": profiled(lambda: dst.copy_(src))})
        c.attempt(f"copy {kib} KiB", one)
    common.log("copies done")


def run_math(c: Ctx, eager: bool = True) -> None:
    import torch
    import triton

    from . import triton_kernels as TK

    OPS = TK.MATH_OPS
    math_k = TK.math_k_kernel

    n = (1 << 22) if c.smoke else (1 << 25)
    x = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    y = torch.empty_like(x)
    BLOCK, warps = 1024, 4
    grid = (triton.cdiv(n, BLOCK),)
    for op_i, op in enumerate(OPS):
        for K in ((1, 4) if c.smoke else (1, 4, 16)):
            def one(op_i: int = op_i, op: str = op, K: int = K) -> None:
                ck = math_k[grid](x, y, n, OP=op_i, K=K, BLOCK=BLOCK, num_warps=warps)
                r = c.bench(lambda i: math_k[grid](x, y, n, OP=op_i, K=K, BLOCK=BLOCK, num_warps=warps))
                c.rf.add({"bench": "math_k", "op": op, "K": K, "numel": n, "dtype": "bfloat16", "math": "fp32",
                          "BLOCK": BLOCK, "num_warps": warps, "grid": list(grid), "bytes": 4 * n,
                          "per_iteration_extra": {"exp": "x*0.01", "log": "abs+1", "sqrt": "abs", "rsqrt": "abs+1",
                                                  "pow": "abs+1, exponent 0.75", "silu": "x*sigmoid(x)"}.get(op),
                          **common.triton_kernel_info(ck), **r})
            c.attempt(f"math {op} K={K}", one)
    torch_ops = {"sin": torch.sin, "cos": torch.cos, "tanh": torch.tanh, "exp": torch.exp, "log": torch.log,
                 "sqrt": torch.sqrt, "rsqrt": torch.rsqrt, "sigmoid": torch.sigmoid,
                 "silu": torch.nn.functional.silu, "pow": lambda t: torch.pow(t, 0.75), "erf": torch.erf}
    xp = x.abs() + 0.5
    for op, f in (torch_ops.items() if eager else ()):
        def eager(op: str = op, f: Any = f) -> None:
            c.rf.add({"bench": "math_eager", "op": op, "numel": n, "dtype": "bfloat16", "bytes": 4 * n,
                      "kernels": profiled(lambda: f(xp))})
        c.attempt(f"math eager {op}", eager)
    common.log("math done")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--budget-s", type=float, default=200.0)
    ap.add_argument("--parts", default="fused,attention,reduction,gemm,copy,math")
    ns = ap.parse_args(argv)
    os.makedirs(ns.out, exist_ok=True)
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    c = Ctx(ns.out, ns.smoke, ns.budget_s)
    common.warm_gpu(1.0)
    parts = {"fused": run_fused, "attention": run_attention, "reduction": run_reduction, "gemm": run_gemm,
             "copy": run_copy, "math": run_math}
    for name in ns.parts.split(","):
        t0 = time.time()
        c.attempt(name, lambda name=name: parts[name](c))
        common.log(f"part {name}: {time.time() - t0:.1f} s")
    c.rf.close("truncated" if c.rf.doc.get("truncated") else "complete")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
