# ruff: noqa: B023  (closures run inside the loop iteration that defines them)
"""Bandwidth-bound groups: copy, elementwise, register_sweep, reduction, layout."""

from __future__ import annotations

from typing import Any

from . import common


def _gbps(nbytes: float, us: float) -> float:
    return nbytes / (us * 1e-6) / 1e9 if us > 0 else 0.0


def _occupancy(n_regs: int | None, num_warps: int, shared: int | None, sm_regs: int = 65536,
               max_warps: int = 64, max_blocks: int = 32, smem_per_sm: int = 233472) -> dict[str, Any]:
    """Resident blocks/warps per SM from registers (allocated per warp in units of 256),
    threads and shared memory: a derived helper figure, the inputs are recorded too."""
    if not n_regs:
        return {}
    regs_per_warp = -(-n_regs * 32 // 256) * 256
    by_regs = sm_regs // (regs_per_warp * num_warps)
    by_warps = max_warps // num_warps
    by_smem = smem_per_sm // (shared + 1024) if shared else max_blocks
    blocks = max(0, min(by_regs, by_warps, by_smem, max_blocks))
    return {"blocks_per_sm_est": blocks, "warps_per_sm_est": blocks * num_warps,
            "occupancy_est": blocks * num_warps / max_warps}


def _sizes_pow(lo: int, hi: int, factor: int) -> list[int]:
    out, v = [], lo
    while v <= hi:
        out.append(v)
        v *= factor
    if out[-1] != hi:
        out.append(hi)
    return out


# ----------------------------------------------------------------------------- copy


def run_copy(ctx: Any) -> None:
    import torch

    from . import triton_kernels as K

    total_sizes = ctx.pick([8 << 10, 1 << 20, 64 << 20],
                           _sizes_pow(8 << 10, 4 << 30, 4),
                           _sizes_pow(8 << 10, 4 << 30, 2))
    for total in total_sizes:
        if ctx.out_of_time():
            return
        numel = total // 4  # bf16: 2 bytes read + 2 bytes written per element
        src = torch.randn(numel, device="cuda", dtype=torch.bfloat16)
        dst = torch.empty_like(src)
        impls = {
            "torch_copy_": lambda: dst.copy_(src),
            "triton_copy": lambda: K.launch_copy(src, dst, BLOCK=4096, num_warps=8),
        }
        for impl, fn in impls.items():
            def one(impl: str = impl, fn: Any = fn) -> None:
                rec: dict[str, Any] = {"bench": "copy", "impl": impl, "dtype": "bfloat16", "numel": numel,
                                       "bytes": total, "bytes_note": "read+write"}
                if impl == "triton_copy":
                    ck, grid = K.launch_copy(src, dst, BLOCK=4096, num_warps=8)
                    rec.update({"BLOCK": 4096, "grid": list(grid), **common.triton_kernel_info(ck)})
                r = ctx.bench(lambda i: fn(), flush=True)
                rec.update(r)
                rec["gbps"] = _gbps(total, r["time_us"])
                if total <= (32 << 20):
                    g = common.bench_graph(fn, n_inner=ctx.pick(5, 20, 50), n_replays=ctx.pick(3, 10, 20))
                    rec["graph_time_us"] = g["time_us"]
                    rec["graph_gbps_l2_warm"] = _gbps(total, g["time_us"])
                    rec["graph_n_inner"] = g["n_inner"]
                assert torch.equal(dst, src), "copy mismatch"
                ctx.record(rec)
            ctx.attempt(f"copy {impl} {total}", one)
        del src, dst
    # persistent copy with a limited number of CTAs
    total = ctx.pick(64 << 20, 256 << 20, 1 << 30)
    numel = total // 4
    src = torch.randn(numel, device="cuda", dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    sm = torch.cuda.get_device_properties(0).multi_processor_count
    ctas_list = ctx.pick([1, 132], [1, 4, 16, 66, 132, 264], [1, 2, 4, 8, 16, 33, 66, 132, 264, 528])
    for num_warps in ctx.pick([8], [8], [4, 8]):
        for ctas in ctas_list:
            if ctx.out_of_time():
                return

            def one(ctas: int = ctas, num_warps: int = num_warps) -> None:
                dst.zero_()
                ck, grid = K.launch_copy_persistent(src, dst, ctas, BLOCK=4096, num_warps=num_warps)
                assert torch.equal(dst, src), "copy mismatch"
                r = ctx.bench(lambda i: K.launch_copy_persistent(src, dst, ctas, BLOCK=4096, num_warps=num_warps),
                              flush=True, max_reps=ctx.pick(3, 10, 25))
                rec = {"bench": "copy_persistent", "impl": "triton_copy_persistent", "dtype": "bfloat16",
                       "numel": numel, "bytes": total, "bytes_note": "read+write", "ctas": ctas, "sm_count": sm,
                       "BLOCK": 4096, "grid": list(grid), **common.triton_kernel_info(ck), **r}
                rec["gbps"] = _gbps(total, r["time_us"])
                rec["gbps_per_cta"] = rec["gbps"] / ctas
                ctx.record(rec)
            ctx.attempt(f"copy_persistent ctas={ctas}", one)


# ----------------------------------------------------------------------------- elementwise

# nominal operations per element by unit, as written in the kernels (see triton_kernels.py)
OPS = {
    "copy": {},
    "bias_add": {"fp32": 1},
    "gelu": {"erf": 1, "fp32": 4},
    "dropout": {"rng": 1, "fp32": 3},
    "dropout_mask": {"rng": 1, "fp32": 3},
    "bias_gelu_dropout_fwd": {"erf": 1, "rng": 1, "fp32": 8},
    "bias_gelu_dropout_fwd_mask": {"erf": 1, "rng": 1, "fp32": 8},
    "bias_gelu_dropout_bwd": {"erf": 1, "exp": 1, "rng": 1, "fp32": 13},
}


def _elementwise_cases(K: Any, torch: Any, numel: int, compute_sizes: bool) -> list[dict[str, Any]]:
    """Build (name, launcher, bytes, ops) cases for one numel; tensors are created lazily."""
    cases: list[dict[str, Any]] = []

    def add(name: str, make: Any, bytes_per_elem: float, ops: dict[str, int], extra: dict[str, Any] | None = None,
            impl: str = "triton") -> None:
        cases.append({"name": name, "make": make, "bytes": int(bytes_per_elem * numel), "ops": ops,
                      "extra": extra or {}, "impl": impl})

    bf = torch.bfloat16
    if not compute_sizes:
        add("copy", lambda t: (lambda: K.launch_copy(t["x"], t["y"], BLOCK=1024, num_warps=4)), 4, OPS["copy"],
            {"BLOCK": 1024, "num_warps": 4})
        for hidden in (4096, 16384):
            if numel % hidden == 0:
                add("bias_add", lambda t, hidden=hidden: (lambda: K.launch_bias_add(t["x"], t[f"b{hidden}"], t["y"])),
                    4, OPS["bias_add"], {"hidden": hidden, "BLOCK": 1024, "num_warps": 4})
                add("bias_add", lambda t, hidden=hidden: (lambda: t["x"].view(-1, hidden).add(t[f"b{hidden}"])),
                    4, OPS["bias_add"], {"hidden": hidden}, impl="torch_eager")
        add("gelu", lambda t: (lambda: K.launch_gelu(t["x"], t["y"])), 4, OPS["gelu"], {"BLOCK": 1024, "num_warps": 4})
        add("gelu", lambda t: (lambda: torch.nn.functional.gelu(t["x"])), 4, OPS["gelu"], impl="torch_eager")
        add("dropout", lambda t: (lambda: K.launch_dropout(t["x"], t["y"], 0.1, 1234)), 4, OPS["dropout"],
            {"p": 0.1, "BLOCK": 1024, "num_warps": 4})
        add("dropout_mask", lambda t: (lambda: K.launch_dropout(t["x"], t["y"], 0.1, 1234, mask=t["m8"])), 5,
            OPS["dropout_mask"], {"p": 0.1, "mask_dtype": "uint8", "BLOCK": 1024, "num_warps": 4})
        add("dropout_mask", lambda t: (lambda: torch.native_dropout(t["x"], 0.1, True)), 5, OPS["dropout_mask"],
            {"p": 0.1, "mask_dtype": "bool", "op": "torch.native_dropout"}, impl="torch_eager")
        add("mul_mask_scale", lambda t: (lambda: t["x"] * t["mb"] * (1.0 / 0.9)), 9, {"fp32": 2},
            {"p": 0.1, "op": "x*mask*scale (2 kernels, bf16 intermediate)", "mask_dtype": "bool"}, impl="torch_eager")
        for hidden in (16384,):
            if numel % hidden == 0:
                add("bias_gelu_dropout_fwd",
                    lambda t, hidden=hidden: (lambda: K.launch_bgd_fwd(t["x"], t[f"b{hidden}"], t["y"], 0.1, 99)),
                    4, OPS["bias_gelu_dropout_fwd"], {"hidden": hidden, "p": 0.1, "BLOCK": 1024, "num_warps": 4})
                add("bias_gelu_dropout_fwd_mask",
                    lambda t, hidden=hidden: (lambda: K.launch_bgd_fwd(t["x"], t[f"b{hidden}"], t["y"], 0.1, 99,
                                                                       mask=t["m8"])),
                    5, OPS["bias_gelu_dropout_fwd_mask"],
                    {"hidden": hidden, "p": 0.1, "mask_dtype": "uint8", "BLOCK": 1024, "num_warps": 4})
                add("bias_gelu_dropout_bwd",
                    lambda t, hidden=hidden: (lambda: K.launch_bgd_bwd(t["g"], t["x"], t[f"b{hidden}"], t["y"], 0.1,
                                                                       99)),
                    6, OPS["bias_gelu_dropout_bwd"], {"hidden": hidden, "p": 0.1, "BLOCK": 1024, "num_warps": 4})
    else:
        for k in (1, 4, 16):
            add(f"erf_x{k}", lambda t, k=k: (lambda: K.launch_erf_k(t["x"], t["y"], k)), 4, {"erf": k, "fp32": k},
                {"k": k, "BLOCK": 1024, "num_warps": 4})
            add(f"rand_x{k}", lambda t, k=k: (lambda: K.launch_rand_k(t["x"], t["y"], k)), 4, {"rng": k, "fp32": 2 * k},
                {"k": k, "BLOCK": 1024, "num_warps": 4})
        for k in (64, 256):
            add(f"fma_x{k}", lambda t, k=k: (lambda: K.launch_fma_k(t["x"], t["y"], k)), 4, {"fp32_fma": k},
                {"k": k, "BLOCK": 1024, "num_warps": 4})
    del bf
    return cases


def run_elementwise(ctx: Any) -> None:
    import torch

    from . import triton_kernels as K

    mem_sizes = ctx.pick([1 << 16, 1 << 20], [1 << 16, 1 << 20, 1 << 24, 1 << 28],
                         [1 << 16, 1 << 18, 1 << 20, 1 << 22, 1 << 24, 1 << 26, 1 << 28, 1 << 29])
    cmp_sizes = ctx.pick([1 << 16], [1 << 24], [1 << 22, 1 << 26])
    plan = [(n, False) for n in mem_sizes] + [(n, True) for n in cmp_sizes]
    for numel, compute in plan:
        if ctx.out_of_time():
            return
        t = {
            "x": torch.randn(numel, device="cuda", dtype=torch.bfloat16),
            "y": torch.empty(numel, device="cuda", dtype=torch.bfloat16),
        }
        if not compute:
            t["g"] = torch.randn(numel, device="cuda", dtype=torch.bfloat16)
            t["m8"] = torch.empty(numel, device="cuda", dtype=torch.uint8)
            t["mb"] = torch.rand(numel, device="cuda") > 0.1
            for hidden in (4096, 16384):
                t[f"b{hidden}"] = torch.randn(hidden, device="cuda", dtype=torch.bfloat16)
        for case in _elementwise_cases(K, torch, numel, compute):
            if ctx.out_of_time():
                return

            def one(case: dict[str, Any] = case) -> None:
                fn = case["make"](t)
                first = fn()
                rec: dict[str, Any] = {"bench": "elementwise", "kernel": case["name"], "impl": case["impl"],
                                       "numel": numel, "dtype": "bfloat16", "math": "fp32", "bytes": case["bytes"],
                                       "ops_per_element": case["ops"], **case["extra"]}
                if case["impl"] == "triton" and isinstance(first, tuple):
                    ck, grid = first
                    info = common.triton_kernel_info(ck)
                    rec.update({"grid": list(grid), **info})
                    rec.update(_occupancy(info.get("n_regs"), info.get("num_warps", 4), info.get("shared_bytes")))
                r = ctx.bench(lambda i: fn(), flush=True)
                rec.update(r)
                rec["gbps"] = _gbps(case["bytes"], r["time_us"])
                for unit, k in case["ops"].items():
                    rec[f"g{unit}_per_s"] = numel * k / (r["time_us"] * 1e-6) / 1e9
                if numel <= (1 << 20):
                    g = common.bench_graph(fn, n_inner=ctx.pick(5, 20, 50), n_replays=ctx.pick(3, 10, 20))
                    rec["graph_time_us"] = g["time_us"]
                ctx.record(rec)
            ctx.attempt(f"elementwise {case['name']} {case['impl']} n={numel}", one)
        t = {}
        torch.cuda.empty_cache()


# ----------------------------------------------------------------------------- register sweep


def run_register_sweep(ctx: Any) -> None:
    """The fused bias+GELU+dropout forward (fp32 math, bf16 io, mask not stored) over BLOCK
    and num_warps: registers, spills and time, at three token counts x 16384."""
    import torch

    from . import triton_kernels as K

    hidden = 16384
    tokens_list = ctx.pick([128], [128, 16384], [128, 2048, 16384])
    blocks = ctx.pick([256, 8192], [128, 512, 2048, 4096, 8192, 16384],
                      [128, 256, 512, 1024, 2048, 4096, 8192, 16384])
    # full: num_warps=2 measured until wave 10 (28 of the sweep's configs -> 21 without it; about 10 s of a
    # full calibration, mostly Triton compiles on the host). Refitting the committed raw folders K, X, Y, W and
    # the shipped one without its records (scripts/calib_trim_check.py) moves only the register fits: the knee
    # by less than its spread between machines (W 2.18 -> 1.98 on W, just under its 2.00-2.38 interval; the
    # exponent 12 -> 8 on K, 4 -> 3 on W, inside theirs), the rest by <= 10 % inside their intervals
    # (calibration/README.md, "The wave-11 trim")
    warps_list = ctx.pick([4], [4, 8, 1], [4, 8, 1])
    max_spilling = 2  # per num_warps: stop growing BLOCK after this many spilling configs
    data = {}
    for tokens in tokens_list:
        numel = tokens * hidden
        data[tokens] = (torch.randn(numel, device="cuda", dtype=torch.bfloat16),
                        torch.randn(hidden, device="cuda", dtype=torch.bfloat16),
                        torch.empty(numel, device="cuda", dtype=torch.bfloat16))
    p = 0.1
    for num_warps in warps_list:
        spilling = 0
        for BLOCK in blocks:
            ept = BLOCK / (32 * num_warps)
            if ept < 1 or ept > 128 or spilling >= max_spilling:
                continue
            for tokens in tokens_list:
                if ctx.out_of_time():
                    return
                h, b, y = data[tokens]
                numel = h.numel()

                def one(BLOCK: int = BLOCK, num_warps: int = num_warps, tokens: int = tokens, h: Any = h,
                        b: Any = b, y: Any = y, numel: int = numel) -> dict[str, Any]:
                    ck, grid = K.launch_bgd_fwd(h, b, y, p, 7, BLOCK=BLOCK, num_warps=num_warps)
                    info = common.triton_kernel_info(ck)
                    r = ctx.bench(lambda i: K.launch_bgd_fwd(h, b, y, p, 7, BLOCK=BLOCK, num_warps=num_warps),
                                  flush=True)
                    rec = {"bench": "register_sweep", "kernel": "bias_gelu_dropout_fwd", "tokens": tokens,
                           "hidden": hidden, "numel": numel, "dtype": "bfloat16", "math": "fp32", "p": p,
                           "BLOCK": BLOCK, "num_warps": num_warps, "elements_per_thread": ept,
                           "grid": list(grid), "bytes": 4 * numel + 2 * hidden,
                           "ops_per_element": OPS["bias_gelu_dropout_fwd"], **info,
                           **_occupancy(info.get("n_regs"), num_warps, info.get("shared_bytes")), **r}
                    rec["waves_est"] = (grid[0] / (132 * rec["blocks_per_sm_est"])
                                        if rec.get("blocks_per_sm_est") else None)
                    rec["gbps"] = _gbps(rec["bytes"], r["time_us"])
                    ctx.record(rec)
                    return rec
                rec = ctx.attempt(f"register_sweep BLOCK={BLOCK} w={num_warps} T={tokens}", one)
                if rec is None:
                    break
            else:
                last = ctx.rf.doc["records"][-1] if ctx.rf.doc["records"] else {}
                if last.get("BLOCK") == BLOCK and last.get("num_warps") == num_warps and last.get("n_spills", 0) > 0:
                    spilling += 1
    # correctness spot check of the kernel at p=0 against torch (recorded, not asserted)
    h, b, y = data[tokens_list[0]]
    K.launch_bgd_fwd(h, b, y, 0.0, 7, BLOCK=1024, num_warps=4)
    ref = torch.nn.functional.gelu(h.view(-1, hidden).float() + b.float()).view(-1)
    err = ((y.float() - ref).norm() / ref.norm()).item()
    ctx.rf.doc["check_p0_rel_err"] = err


# ----------------------------------------------------------------------------- reduction


def run_reduction(ctx: Any) -> None:
    import torch
    import torch.nn.functional as F

    rows_list = ctx.pick([1024], [2048, 16384], [512, 2048, 8192, 32768])
    cols_list = ctx.pick([4096], [1024, 4096, 16384], [1024, 2048, 4096, 8192, 16384])
    for rows in rows_list:
        for cols in cols_list:
            if rows * cols > (1 << 28):
                continue
            if ctx.out_of_time():
                return

            def one(rows: int = rows, cols: int = cols) -> None:
                x = torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                w = torch.randn(cols, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                bb = torch.randn(cols, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                gy = torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16)
                nb = rows * cols * 2
                base = {"rows": rows, "cols": cols, "dtype": "bfloat16"}
                with torch.no_grad():
                    r = ctx.bench(lambda i: F.layer_norm(x, (cols,), w, bb), flush=True)
                ctx.record({"bench": "layernorm_fwd", **base, "bytes": 2 * nb, **r,
                            "gbps": _gbps(2 * nb, r["time_us"])})
                y = F.layer_norm(x, (cols,), w, bb)

                def bwd(i: int) -> None:
                    x.grad = w.grad = bb.grad = None
                    y.backward(gy, retain_graph=True)
                r = ctx.bench(bwd, flush=True)
                ctx.record({"bench": "layernorm_bwd", **base, "bytes": 3 * nb, "bytes_note": "read x, gy; write gx",
                            **r, "gbps": _gbps(3 * nb, r["time_us"])})
                with torch.no_grad():
                    r = ctx.bench(lambda i: torch.softmax(x, dim=-1), flush=True)
                ctx.record({"bench": "softmax_fwd", **base, "bytes": 2 * nb, **r, "gbps": _gbps(2 * nb, r["time_us"])})
            ctx.attempt(f"reduction {rows}x{cols}", one)
    for tokens in ctx.pick([512], [128, 2048, 16384], [128, 512, 1024, 2048, 4096, 8192, 16384]):
        for dtype in (torch.bfloat16, torch.float32):
            if ctx.out_of_time():
                return

            def one(tokens: int = tokens, dtype: Any = dtype) -> None:
                x = torch.randn(tokens, 16384, device="cuda", dtype=dtype)
                nb = x.numel() * x.element_size() + 16384 * x.element_size()
                r = ctx.bench(lambda i: x.sum(dim=0), flush=True)
                ctx.record({"bench": "sum_dim0", "rows": tokens, "cols": 16384, "dtype": str(dtype).split(".")[-1],
                            "bytes": nb, **r, "gbps": _gbps(nb, r["time_us"])})
            ctx.attempt(f"sum_dim0 {tokens}", one)


# ----------------------------------------------------------------------------- layout


def run_layout(ctx: Any) -> None:
    import torch

    shapes = ctx.pick([(1024, 1024)],
                      [(1024, 1024), (4096, 4096), (16384, 16384), (1000, 4097)],
                      [(1024, 1024), (4096, 4096), (8192, 8192), (16384, 16384), (4096, 16384), (16384, 4096),
                       (1000, 4097), (16384, 1024)])
    for R, C in shapes:
        if ctx.out_of_time():
            return

        def one(R: int = R, C: int = C) -> None:
            x = torch.randn(R, C, device="cuda", dtype=torch.bfloat16)
            nb = 2 * x.numel() * 2
            r = ctx.bench(lambda i: x.t().contiguous(), flush=True)
            ctx.record({"bench": "transpose_contiguous", "rows": R, "cols": C, "dtype": "bfloat16", "bytes": nb, **r,
                        "gbps": _gbps(nb, r["time_us"])})
        ctx.attempt(f"transpose {R}x{C}", one)
    nchw = ctx.pick([(8, 64, 32, 32)],
                    [(32, 64, 56, 56), (8, 512, 28, 28), (64, 3, 224, 224)],
                    [(32, 64, 56, 56), (32, 256, 56, 56), (8, 512, 28, 28), (64, 3, 224, 224), (16, 1024, 14, 14)])
    for shape in nchw:
        if ctx.out_of_time():
            return

        def one(shape: tuple[int, ...] = shape) -> None:
            x = torch.randn(*shape, device="cuda", dtype=torch.bfloat16)
            xl = x.contiguous(memory_format=torch.channels_last)
            nb = 2 * x.numel() * 2
            r = ctx.bench(lambda i: x.contiguous(memory_format=torch.channels_last), flush=True)
            ctx.record({"bench": "nchw_to_nhwc", "shape": list(shape), "dtype": "bfloat16", "bytes": nb, **r,
                        "gbps": _gbps(nb, r["time_us"])})
            r = ctx.bench(lambda i: xl.contiguous(), flush=True)
            ctx.record({"bench": "nhwc_to_nchw", "shape": list(shape), "dtype": "bfloat16", "bytes": nb, **r,
                        "gbps": _gbps(nb, r["time_us"])})
        ctx.attempt(f"channels_last {shape}", one)
    for numel in ctx.pick([1 << 20], [1 << 20, 1 << 24, 1 << 28], [1 << 20, 1 << 22, 1 << 24, 1 << 26, 1 << 28]):
        for src, dst in ((torch.bfloat16, torch.float32), (torch.float32, torch.bfloat16)):
            if ctx.out_of_time():
                return

            def one(numel: int = numel, src: Any = src, dst: Any = dst) -> None:
                x = torch.randn(numel, device="cuda", dtype=src)
                nb = numel * (x.element_size() + torch.empty(0, dtype=dst).element_size())
                r = ctx.bench(lambda i: x.to(dst), flush=True)
                ctx.record({"bench": "cast", "numel": numel, "src_dtype": str(src).split(".")[-1],
                            "dst_dtype": str(dst).split(".")[-1], "bytes": nb, **r, "gbps": _gbps(nb, r["time_us"])})
            ctx.attempt(f"cast {numel} {src}->{dst}", one)
