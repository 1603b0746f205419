# ruff: noqa: B023  (closures run inside the loop iteration that defines them)
"""Tensor-core groups: gemm (torch.mm / cuBLAS) and attention (SDPA)."""

from __future__ import annotations

import math
from typing import Any

DT = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "tf32": "float32"}


def _gemm_shapes(ctx: Any) -> list[tuple[int, int, int, str, str, str]]:
    """(m, n, k, dtype, layout, tag) list."""
    shapes: list[tuple[int, int, int, str, str, str]] = []
    nk_all = [(n, k) for n in (1024, 2048, 4096, 8192, 16384) for k in (1024, 2048, 4096, 8192, 16384)]
    nk_few = [(4096, 4096), (4096, 16384), (16384, 4096), (8192, 8192), (2048, 2048)]
    if ctx.mode == "smoke":
        return [(1024, 1024, 1024, "bf16", "nn", "grid"), (1000, 4097, 4096, "bf16", "nn", "misaligned"),
                (2048, 4096, 16384, "bf16", "tn", "mlp"), (1024, 1024, 1024, "tf32", "nn", "dtype")]
    if ctx.mode == "quick":
        for m in (1, 16, 128, 1024, 4096, 16384):
            for n, k in [(4096, 4096), (16384, 4096), (4096, 16384), (8192, 8192)]:
                shapes.append((m, n, k, "bf16", "nn", "grid"))
    else:
        for m in (1, 16, 128, 1024, 4096, 16384):
            for n, k in nk_all:
                shapes.append((m, n, k, "bf16", "nn", "grid"))
        for m in (8, 64, 256, 512, 2048, 8192):
            for n, k in nk_few:
                shapes.append((m, n, k, "bf16", "nn", "grid"))
    # misaligned
    mis_nk = [(4096, 4096), (4095, 4096), (4097, 4096), (4100, 4096), (1000, 4096), (12290, 4096),
              (4096, 4095), (4096, 4097), (4096, 4100), (4096, 1000), (4096, 12290)]
    for m in ((1000, 3000, 4096) if ctx.mode == "full" else (1000, 4096)):
        for n, k in (mis_nk if ctx.mode == "full" else mis_nk[:6]):
            shapes.append((m, n, k, "bf16", "nn", "misaligned"))
    # MLP shapes (H=4096, F=16384): forward and backward operand layouts
    H, F = 4096, 16384
    for T in ((128, 512, 1000, 1001, 2048, 4096, 8192, 16384) if ctx.mode == "full" else (128, 1001, 4096)):
        shapes += [
            (T, F, H, "bf16", "nn", "mlp:fc1_fwd h=x@W1"),
            (T, H, F, "bf16", "nn", "mlp:fc2_fwd y=d@W2"),
            (T, F, H, "bf16", "nt", "mlp:fc2_dgrad gd=gy@W2^T"),
            (F, H, T, "bf16", "tn", "mlp:fc2_wgrad gW2=d^T@gy"),
            (T, H, F, "bf16", "nt", "mlp:fc1_dgrad gx=gh@W1^T"),
            (H, F, T, "bf16", "tn", "mlp:fc1_wgrad gW1=x^T@gh"),
        ]
    # dtypes
    for m, n, k in ((4096, 4096, 4096), (8192, 8192, 8192), (16384, 4096, 16384), (128, 4096, 4096)):
        for dt in ("fp16", "tf32") + (("fp32",) if m == 4096 else ()):
            shapes.append((m, n, k, dt, "nn", "dtype"))
    return shapes


def run_gemm(ctx: Any) -> None:
    import torch

    from .trace_utils import export_trace, kernels_by_annotation

    l2 = torch.cuda.get_device_properties(0).L2_cache_size if hasattr(torch.cuda.get_device_properties(0),
                                                                       "L2_cache_size") else 50 << 20
    shapes = _gemm_shapes(ctx)
    ctx.rf.doc["n_shapes_planned"] = len(shapes)
    done: list[tuple[dict[str, Any], Any]] = []
    prev_tf32 = torch.backends.cuda.matmul.allow_tf32
    for m, n, k, dt, layout, tag in shapes:
        if ctx.out_of_time():
            break

        def one(m: int = m, n: int = n, k: int = k, dt: str = dt, layout: str = layout, tag: str = tag) -> None:
            dtype = getattr(torch, DT[dt])
            torch.backends.cuda.matmul.allow_tf32 = dt == "tf32"
            esz = torch.empty(0, dtype=dtype).element_size()
            set_bytes = (m * k + k * n + m * n) * esz
            n_sets = max(1, min(8, math.ceil(3 * l2 / set_bytes)))
            sets = []
            for _ in range(n_sets):
                a = (torch.randn(k, m, device="cuda", dtype=dtype).t() if layout == "tn"
                     else torch.randn(m, k, device="cuda", dtype=dtype))
                b = (torch.randn(n, k, device="cuda", dtype=dtype).t() if layout == "nt"
                     else torch.randn(k, n, device="cuda", dtype=dtype))
                sets.append((a, b, torch.empty(m, n, device="cuda", dtype=dtype)))

            def fn(i: int) -> None:
                a, b, c = sets[i % n_sets]
                torch.mm(a, b, out=c)
            r = ctx.bench(fn, flush=False)
            flops = 2.0 * m * n * k
            rec = {"bench": "gemm", "m": m, "n": n, "k": k, "dtype": DT[dt], "tf32": dt == "tf32", "layout": layout,
                   "tag": tag, "flops": flops, "input_sets": n_sets,
                   "bytes_min": set_bytes, **r, "tflops": flops / (r["time_us"] * 1e-6) / 1e12}
            done.append((len(ctx.rf.doc["records"]), m, n, k, dt, layout))
            ctx.record(rec)
        ctx.attempt(f"gemm {m}x{n}x{k} {dt} {layout}", one)
    torch.backends.cuda.matmul.allow_tf32 = prev_tf32
    # cuBLAS kernel names: one profiled call per shape (fresh inputs), in one profiler session
    if done and not ctx.budget.expired(reserve_s=-20):
        def names() -> None:
            torch.cuda.synchronize()
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                                    torch.profiler.ProfilerActivity.CUDA]) as prof:
                for i, (_, m, n, k, dt, layout) in enumerate(done):
                    dtype = getattr(torch, DT[dt])
                    torch.backends.cuda.matmul.allow_tf32 = dt == "tf32"
                    a = (torch.randn(k, m, device="cuda", dtype=dtype).t() if layout == "tn"
                         else torch.randn(m, k, device="cuda", dtype=dtype))
                    b = (torch.randn(n, k, device="cuda", dtype=dtype).t() if layout == "nt"
                         else torch.randn(k, n, device="cuda", dtype=dtype))
                    c = torch.empty(m, n, device="cuda", dtype=dtype)
                    with torch.profiler.record_function(f"ksgemm_{i}"):
                        torch.mm(a, b, out=c)
                    del a, b, c
                torch.cuda.synchronize()
            torch.backends.cuda.matmul.allow_tf32 = prev_tf32
            by = kernels_by_annotation(export_trace(prof), "ksgemm_")
            for i, (idx, *_rest) in enumerate(done):
                ks = by.get(f"ksgemm_{i}", [])
                ctx.rf.doc["records"][idx]["kernels"] = [
                    {"name": e["name"][:160], "duration_us": e["duration_us"], "grid": e.get("grid"),
                     "block": e.get("block"), "registers_per_thread": e.get("registers_per_thread"),
                     "shared_memory_bytes": e.get("shared_memory_bytes")} for e in ks]
            ctx.rf.write()
        ctx.attempt("gemm kernel names", names)


def run_attention(ctx: Any) -> None:
    import torch
    import torch.nn.functional as F

    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        flash = lambda: sdpa_kernel(SDPBackend.FLASH_ATTENTION)  # noqa: E731
    except Exception:  # noqa: BLE001
        flash = lambda: torch.backends.cuda.sdp_kernel(enable_flash=True, enable_math=False,  # noqa: E731
                                                       enable_mem_efficient=False)
    tokens = ctx.pick(2048, 16384, 16384)
    seqs = ctx.pick([512], [512, 2048, 8192], [512, 1024, 2048, 4096, 8192])
    hds = ctx.pick([128], [64, 128], [64, 128])
    for S in seqs:
        for D in hds:
            for causal in (False, True):
                if ctx.out_of_time():
                    return

                def one(S: int = S, D: int = D, causal: bool = causal) -> None:
                    B, H = max(1, tokens // S), 2048 // D
                    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                               for _ in range(3))
                    go = torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16)
                    fl = 4.0 * B * H * S * S * D * (0.5 if causal else 1.0)
                    base = {"batch": B, "heads": H, "seq": S, "head_dim": D, "causal": causal, "dtype": "bfloat16",
                            "backend": "flash"}
                    with flash(), torch.no_grad():
                        r = ctx.bench(lambda i: F.scaled_dot_product_attention(q, k, v, is_causal=causal), flush=True)
                    ctx.record({"bench": "sdpa_fwd", **base, "flops": fl, **r,
                                "tflops": fl / (r["time_us"] * 1e-6) / 1e12})

                    def fb(i: int) -> None:
                        q.grad = k.grad = v.grad = None
                        with flash():
                            o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                        o.backward(go)
                    r = ctx.bench(fb, flush=True)
                    ctx.record({"bench": "sdpa_fwd_bwd", **base, "flops": 3.5 * fl,
                                "flops_note": "fwd 4BHS^2D (x0.5 causal); bwd = 2.5x fwd", **r,
                                "tflops": 3.5 * fl / (r["time_us"] * 1e-6) / 1e12})
                ctx.attempt(f"sdpa S={S} D={D} causal={causal}", one)
    # decode: q_len 1 over a KV cache of length L (default backend selection)
    for L in ctx.pick([512], [512, 4096, 32768], [512, 2048, 8192, 32768]):
        for B in ctx.pick([8], [1, 32, 64], [1, 8, 32, 64]):
            if ctx.out_of_time():
                return

            def one(L: int = L, B: int = B) -> None:
                H, D = 16, 128
                q = torch.randn(B, H, 1, D, device="cuda", dtype=torch.bfloat16)
                k = torch.randn(B, H, L, D, device="cuda", dtype=torch.bfloat16)
                v = torch.randn(B, H, L, D, device="cuda", dtype=torch.bfloat16)
                with torch.no_grad():
                    r = ctx.bench(lambda i: F.scaled_dot_product_attention(q, k, v), flush=True)
                nb = 2 * B * H * L * D * 2 + 2 * B * H * D * 2
                rec = {"bench": "sdpa_decode", "batch": B, "heads": H, "q_len": 1, "kv_len": L, "head_dim": D,
                       "dtype": "bfloat16", "backend": "default", "bytes": nb, "flops": 4.0 * B * H * L * D, **r,
                       "gbps": nb / (r["time_us"] * 1e-6) / 1e9}
                from .groups_overhead import _count_kernels
                from .heldout_kernels import profiled

                _, names = _count_kernels(lambda: F.scaled_dot_product_attention(q, k, v))
                rec["kernel_names"] = names
                # device-side durations (profiler, L2 flushed, median per kernel over 5 calls): the
                # event time above is host-bound for the small caches (the launch outlasts the kernel)
                with torch.no_grad():
                    rec["kernels"] = profiled(lambda: F.scaled_dot_product_attention(q, k, v))
                ctx.record(rec)
            ctx.attempt(f"sdpa_decode L={L} B={B}", one)
