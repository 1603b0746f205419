# ruff: noqa: B023  (closures run inside the loop iteration that defines them)
"""End-to-end validation workloads on a CUDA GPU, and torch.profiler traces.

    python3 -m sim.calibrate.gpu.validate --mode {smoke,full} --out DIR --traces-out DIR
        [--parts mlp,traces,transformer,decode] [--budget-s S] [--pack ARCHIVE --pack-root DIR]

Writes DIR/mlp_step.json, DIR/transformer_step.json, DIR/decode_step.json
({"meta", "workload", "op_sequence", "status", "records", "errors"}) and
TRACES/<name>.json.gz (Chrome traces with >= 2 ProfilerStep# steps).
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from . import common
from .common import Budget, ResultFile, log

PARTS = ["mlp", "traces", "transformer", "decode"]
PART_SHARE = {"mlp": 0.50, "traces": 0.12, "transformer": 0.25, "decode": 0.13}

MLP_TOKENS = [128, 512, 1000, 1001, 2048, 4096, 8192, 16384]
MLP_TRITON = [(512, 4), (2048, 4), (8192, 4)]  # (BLOCK, num_warps): 4, 16, 64 elements/thread
TB_SHAPES = [(8, 512), (4, 1024), (2, 2048), (1, 4096)]
DEC_B = [1, 8, 32, 64]
DEC_L = [512, 2048]

MLP_OPS = [
    "h = x @ W1            # aten::mm [T,H]x[H,F] (x: [T,H] bf16, W1: [H,F] bf16)",
    "a = h + b1            # aten::add, b1 [F] broadcast over rows",
    "g = F.gelu(a, approximate='none')",
    "d = F.dropout(g, p=0.1, training=True)   # aten::native_dropout (bool mask saved)",
    "y = d @ W2            # aten::mm [T,F]x[F,H]",
    "y.backward(gy)        # gy [T,H] random bf16; x, W1, b1, W2 require grad; grads set to None before each step",
    "triton_fused: h = x@W1; d = FusedBiasGeluDropout(h, b1) (1 Triton kernel, mask not stored, Philox seed per step); "
    "y = d@W2; backward: 1 Triton kernel recomputing a=h+b1 and the mask, gh = gy_d*mask/(1-p)*gelu'(a); "
    "gb1 = gh.sum(0) (torch); plus the four GEMM grads",
    "compiled: torch.compile(forward, mode=default, dynamic=False); backward via AOTAutograd",
]
TB_OPS = [
    "x [B,S,2048] bf16, requires_grad; block params bf16 (nn.Linear with bias, nn.LayerNorm with affine)",
    "qkv = Linear(2048->6144)(LayerNorm(x)).view(B,S,3,16,128).permute(2,0,3,1,4)",
    "o = scaled_dot_product_attention(q, k, v, is_causal=True)   # default backend selection (flash for bf16)",
    "x1 = x + Linear(2048->2048)(o.transpose(1,2).reshape(B,S,2048))",
    "y = x1 + Linear(8192->2048)(gelu_erf(Linear(2048->8192)(LayerNorm(x1))))",
    "y.backward(gy)  # gy random [B,S,2048]; grads set to None before each step; no dropout, no optimizer",
    "compiled: torch.compile(block, mode=default, dynamic=False)",
]
DEC_OPS = [
    "4 layers, d_model 2048, 16 heads x 128, ffn 8192, bf16, torch.no_grad(), eval",
    "per layer, x [B,1,2048]: qkv = Linear(2048->6144)(LayerNorm(x)).view(B,1,3,16,128); q,k,v = unbind(2) -> transpose(1,2) [B,16,1,128]",
    "k_cache.index_copy_(2, pos, k); v_cache.index_copy_(2, pos, v)   # caches [B,16,Lmax=2048,128] preallocated, pos = tensor([L-1])",
    "o = scaled_dot_product_attention(q, k_cache[:,:,:L], v_cache[:,:,:L])   # q_len 1, no mask, default backend",
    "x = x + Linear(2048->2048)(o.transpose(1,2).reshape(B,1,2048))",
    "x = x + Linear(8192->2048)(gelu_erf(Linear(2048->8192)(LayerNorm(x))))",
    "cudagraph: the whole 4-layer step captured with torch.cuda.graph at fixed (B, L); replayed",
]


# ----------------------------------------------------------------------------- helpers


def step_timing(step: Callable[[], Any], zero: Callable[[], Any], n: int) -> dict[str, Any]:
    """Per step, from an idle GPU: CUDA events around the step (device span incl. host gaps),
    host enqueue time and wall time to completion. Medians over n steps."""
    import torch

    ev_t, enq_t, wall_t = [], [], []
    for _ in range(n):
        zero()
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t0 = time.perf_counter()
        s.record()
        step()
        e.record()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        ev_t.append(s.elapsed_time(e) * 1e3)
        enq_t.append((t1 - t0) * 1e6)
        wall_t.append((t2 - t0) * 1e6)
    return {"time_us": statistics.median(ev_t), "samples_us": common.trim_samples(ev_t),
            "cpu_enqueue_us": statistics.median(enq_t), "cpu_wall_us": statistics.median(wall_t),
            "cpu_wall_samples_us": common.trim_samples(wall_t), "n_steps": n}


def back_to_back(step: Callable[[], Any], zero: Callable[[], Any], n: int) -> float:
    """Steps issued back to back without synchronizing; device time per step (us)."""
    import torch

    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(n):
        zero()
        step()
    e.record()
    torch.cuda.synchronize()
    return s.elapsed_time(e) * 1e3 / n


def kernel_list(step: Callable[[], Any], zero: Callable[[], Any]) -> dict[str, Any]:
    """torch.profiler of ONE step: GPU events in order with launch data, and a summary."""
    import torch

    from .trace_utils import compact_kernel_list, export_trace, gpu_events, runtime_events

    zero()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                            torch.profiler.ProfilerActivity.CUDA]) as prof:
        with torch.profiler.record_function("ks_step"):
            step()
        torch.cuda.synchronize()
    tr = export_trace(prof)
    ev = gpu_events(tr)
    kern = [e for e in ev if e["kind"] == "kernel"]
    launches = [r for r in runtime_events(tr) if "aunch" in r.get("name", "")]
    cpu = [x for x in tr.get("traceEvents", []) if x.get("name") == "ks_step" and x.get("ph") == "X"]
    return {
        "n_kernels": len(kern),
        "n_gpu_events": len(ev),
        "kernel_time_sum_us": sum(e["duration_us"] for e in kern),
        "gpu_span_us": (ev[-1]["ts_us"] + ev[-1]["duration_us"] - ev[0]["ts_us"]) if ev else 0.0,
        "cpu_step_us": float(cpu[0]["dur"]) if cpu else None,
        "n_launch_calls": len(launches),
        "launch_call_us_median": statistics.median([float(r.get("dur", 0)) for r in launches]) if launches else None,
        "kernels": compact_kernel_list(ev),
    }


def _set_dynamo_limits() -> None:
    import torch

    cfg = torch._dynamo.config
    for name in ("cache_size_limit", "recompile_limit", "accumulated_cache_size_limit",
                 "accumulated_recompile_limit"):
        if hasattr(cfg, name):
            try:
                setattr(cfg, name, max(256, getattr(cfg, name)))
            except Exception:  # noqa: BLE001
                pass


class Part:
    def __init__(self, mode: str, budget: Budget, rf: ResultFile | None) -> None:
        self.mode, self.budget, self.rf = mode, budget, rf

    def pick(self, smoke: Any, full: Any) -> Any:
        return smoke if self.mode == "smoke" else full

    def out_of_time(self, reserve_s: float = 0.0) -> bool:
        if self.budget.expired(reserve_s):
            if self.rf is not None and not self.rf.doc.get("truncated"):
                self.rf.doc["truncated"] = True
                log(f"[{self.rf.doc['group']}] time budget reached, stopping early")
            return True
        return False

    def attempt(self, where: str, fn: Callable[[], Any]) -> Any:
        import torch

        try:
            return fn()
        except Exception as exc:  # noqa: BLE001
            if self.rf is not None:
                self.rf.error(where, exc)
            else:
                log(f"ERROR {where}: {exc!r}")
            try:
                torch.cuda.synchronize()
            except Exception:  # noqa: BLE001
                pass
            torch.cuda.empty_cache()
            return None


# ----------------------------------------------------------------------------- A: MLP


def _finish_mlp(rec: dict[str, Any], step: Callable[[], Any], mlp: Any, ew: dict[str, Any] | None) -> dict[str, Any]:
    rec["profile"] = kernel_list(step, mlp.zero_grad)
    log(f"mlp T={rec['T']} {rec['variant']}: step {rec['time_us']:.1f} us, cpu wall {rec['step']['cpu_wall_us']:.1f} us, "
        f"b2b {rec['back_to_back_us_per_step']:.1f} us, ew {ew['time_us'] if ew else float('nan'):.1f} us, "
        f"kernels {rec['profile']['n_kernels']}")
    return rec


def run_mlp(part: Part) -> None:
    import torch

    from .workloads import MLP, fused_bgd_function

    _set_dynamo_limits()
    part.rf.doc.update({"workload": "mlp_bias_gelu_dropout_step", "op_sequence": MLP_OPS,
                        "params": {"H": 4096, "F": 16384, "p": 0.1, "dtype": "bfloat16"}})
    tokens = part.pick([1001], MLP_TOKENS)
    variants: list[tuple[str, int, int]] = [("eager", 0, 0), ("compiled", 0, 0)]
    variants += [(f"triton_fused_b{b}", b, w) for b, w in part.pick(MLP_TRITON[:1], MLP_TRITON)]
    n_steps = part.pick(5, 25)
    bench_args = part.pick({"warmup_ms": 1, "rep_ms": 3, "min_reps": 3, "max_reps": 5},
                           {"warmup_ms": 10, "rep_ms": 40, "min_reps": 10, "max_reps": 50})
    for T in tokens:
        mlp = MLP(T)
        for variant, BLOCK, nw in variants:
            if part.out_of_time():
                return

            def one(variant: str = variant, BLOCK: int = BLOCK, nw: int = nw) -> None:
                fwd = mlp.make_forward(variant, BLOCK or 1024, nw or 4)

                def step() -> None:
                    fwd(mlp.x, mlp.W1, mlp.b1, mlp.W2).backward(mlp.gy)
                t0 = time.time()
                for _ in range(3):
                    mlp.zero_grad()
                    step()
                torch.cuda.synchronize()
                warm_s = time.time() - t0
                rec: dict[str, Any] = {"workload": "mlp", "variant": variant, "T": T, "H": mlp.H, "F": mlp.F,
                                       "p": mlp.p, "dtype": "bfloat16", "first_3_steps_s": warm_s}
                if BLOCK:
                    rec.update({"BLOCK": BLOCK, "num_warps": nw})
                rec["step"] = step_timing(step, mlp.zero_grad, n_steps)
                rec["time_us"] = rec["step"]["time_us"]
                rec["back_to_back_us_per_step"] = back_to_back(step, mlp.zero_grad, part.pick(3, 10))
                if variant == "compiled":
                    # elementwise part not measured separately (saves one Inductor compile per T):
                    # the compiled step's kernel list holds its fused elementwise kernels and times
                    part.rf.add(_finish_mlp(rec, step, mlp, None))
                    return
                # elementwise part alone (fwd + bwd incl. bias grad), kernels only
                h = torch.randn(T, mlp.F, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                b1 = mlp.b1.detach().clone().requires_grad_()
                gd = torch.randn(T, mlp.F, device="cuda", dtype=torch.bfloat16)
                ew = mlp.make_elementwise(variant, BLOCK or 1024, nw or 4)

                def ew_fb(i: int) -> None:
                    h.grad = b1.grad = None
                    ew(h, b1).backward(gd)
                r = common.bench(ew_fb, flush=True, **bench_args)
                rec["elementwise_fwd_bwd"] = r
                hd, bd = h.detach(), b1.detach()
                with torch.no_grad():
                    rec["elementwise_fwd"] = common.bench(lambda i: ew(hd, bd), flush=True, **bench_args)
                rec["elementwise_kernels"] = kernel_list(lambda: ew(h, b1).backward(gd),
                                                         lambda: setattr(h, "grad", None))["kernels"]
                part.rf.add(_finish_mlp(rec, step, mlp, r))
            part.attempt(f"mlp T={T} {variant}", one)
        mlp = None
        torch.cuda.empty_cache()

    # correctness of the Triton path: p = 0 against eager; mask rate at p = 0.1
    def check() -> None:
        Fn = fused_bgd_function()
        checks = []
        for T in part.pick([128], [128, 1001, 2048]):
            m = MLP(T, p=0.0, seed=5)
            for BLOCK, nw in part.pick(MLP_TRITON[:1], MLP_TRITON):
                res = {"T": T, "BLOCK": BLOCK, "num_warps": nw}
                outs = {}
                for variant in ("eager", f"triton_fused_b{BLOCK}"):
                    m.zero_grad()
                    y = m.make_forward(variant, BLOCK, nw)(m.x, m.W1, m.b1, m.W2)
                    y.backward(m.gy)
                    outs[variant] = [y.detach().float()] + [t.grad.detach().float() for t in m.params]
                names = ["y", "gx", "gW1", "gb1", "gW2"]
                for nm, a, b in zip(names, outs["eager"], outs[f"triton_fused_b{BLOCK}"], strict=True):
                    res[f"rel_err_{nm}"] = ((a - b).norm() / a.norm()).item()
                h = torch.randn(T, m.F, device="cuda", dtype=torch.bfloat16)
                d = Fn.apply(h, m.b1.detach(), 0.1, BLOCK, nw)
                g = torch.nn.functional.gelu(h.float() + m.b1.detach().float())
                res["dropped_fraction_p0.1"] = ((d == 0) & (g != 0)).float().mean().item()
                checks.append(res)
        part.rf.doc["triton_checks"] = checks
        part.rf.write()
        log(f"triton checks: {checks}")
    part.attempt("triton correctness check", check)


# ----------------------------------------------------------------------------- B: transformer


def run_transformer(part: Part) -> None:
    import torch

    from .workloads import transformer_block_class

    _set_dynamo_limits()
    part.rf.doc.update({"workload": "transformer_block_step", "op_sequence": TB_OPS,
                        "params": {"d_model": 2048, "heads": 16, "head_dim": 128, "d_ff": 8192,
                                   "dtype": "bfloat16", "norm": "pre-LayerNorm", "attention": "causal SDPA",
                                   "activation": "gelu erf", "dropout": 0}})
    Block = transformer_block_class()
    torch.manual_seed(0)
    blk = Block().cuda().to(torch.bfloat16)
    n_steps = part.pick(5, 20)
    for B, S in part.pick([(1, 512)], TB_SHAPES):
        x = torch.randn(B, S, 2048, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        gy = torch.randn(B, S, 2048, device="cuda", dtype=torch.bfloat16)

        def zero() -> None:
            blk.zero_grad(set_to_none=True)
            x.grad = None
        for variant in ("eager", "compiled"):
            if part.out_of_time():
                return

            def one(variant: str = variant, B: int = B, S: int = S) -> None:
                f = blk if variant == "eager" else torch.compile(blk, dynamic=False)

                def step() -> None:
                    f(x).backward(gy)
                t0 = time.time()
                for _ in range(3):
                    zero()
                    step()
                torch.cuda.synchronize()
                rec: dict[str, Any] = {"workload": "transformer_block", "variant": variant, "batch": B, "seq": S,
                                       "tokens": B * S, "first_3_steps_s": time.time() - t0}
                rec["step"] = step_timing(step, zero, n_steps)
                rec["time_us"] = rec["step"]["time_us"]
                rec["back_to_back_us_per_step"] = back_to_back(step, zero, part.pick(3, 10))
                rec["profile"] = kernel_list(step, zero)
                part.rf.add(rec)
                log(f"transformer B={B} S={S} {variant}: step {rec['time_us']:.1f} us, "
                    f"kernels {rec['profile']['n_kernels']}")
            part.attempt(f"transformer {B}x{S} {variant}", one)


# ----------------------------------------------------------------------------- C: decode


def run_decode(part: Part) -> None:
    import torch

    from .workloads import decoder_class

    part.rf.doc.update({"workload": "decode_step", "op_sequence": DEC_OPS,
                        "params": {"layers": 4, "d_model": 2048, "heads": 16, "head_dim": 128, "d_ff": 8192,
                                   "dtype": "bfloat16", "Lmax": max(DEC_L)}})
    Dec = decoder_class()
    torch.manual_seed(0)
    dec = Dec().cuda().to(torch.bfloat16).eval()
    n_steps = part.pick(5, 30)
    noop = lambda: None  # noqa: E731
    for B in part.pick([8], DEC_B):
        caches = dec.alloc_cache(B, max(DEC_L))
        x = torch.randn(B, 1, 2048, device="cuda", dtype=torch.bfloat16)
        for L in part.pick([512], DEC_L):
            if part.out_of_time():
                return

            def one(B: int = B, L: int = L) -> None:
                pos = torch.tensor([L - 1], device="cuda", dtype=torch.long)

                def step() -> Any:
                    with torch.no_grad():
                        return dec(x, caches, pos, L)
                for _ in range(3):
                    step()
                rec: dict[str, Any] = {"workload": "decode", "variant": "eager", "batch": B, "kv_len": L,
                                       "layers": 4}
                rec["step"] = step_timing(step, noop, n_steps)
                rec["time_us"] = rec["step"]["time_us"]
                rec["back_to_back_us_per_step"] = back_to_back(step, noop, part.pick(3, 20))
                rec["profile"] = kernel_list(step, noop)
                part.rf.add(rec)
                # CUDA graph of the whole step
                st = torch.cuda.Stream()
                st.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(st):
                    for _ in range(3):
                        step()
                torch.cuda.current_stream().wait_stream(st)
                torch.cuda.synchronize()
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    step()
                torch.cuda.synchronize()
                grec: dict[str, Any] = {"workload": "decode", "variant": "cudagraph", "batch": B, "kv_len": L,
                                        "layers": 4}
                grec["step"] = step_timing(g.replay, noop, n_steps)
                grec["time_us"] = grec["step"]["time_us"]
                grec["back_to_back_us_per_step"] = back_to_back(g.replay, noop, part.pick(3, 20))
                grec["host_replay"] = common.host_loop(g.replay, n=part.pick(5, 50), repeats=3)
                grec["profile"] = kernel_list(g.replay, noop)
                part.rf.add(grec)
                log(f"decode B={B} L={L}: eager {rec['time_us']:.1f} us ({rec['profile']['n_kernels']} kernels), "
                    f"graph {grec['time_us']:.1f} us")
                del g
            part.attempt(f"decode B={B} L={L}", one)
        caches = None
        torch.cuda.empty_cache()


# ----------------------------------------------------------------------------- traces


def write_trace(path_gz: str, step: Callable[[], Any], zero: Callable[[], Any], active: int = 2) -> dict[str, Any]:
    """Profile warm-up + `active` steps (ProfilerStep# markers, record_shapes=True, CPU+CUDA),
    each step ends with torch.cuda.synchronize(); write gzipped Chrome JSON."""
    import torch

    fd, tmp = tempfile.mkstemp(suffix=".json")
    os.close(fd)

    def handler(p: Any) -> None:
        p.export_chrome_trace(tmp)
    sched = torch.profiler.schedule(wait=0, warmup=1, active=active, repeat=1)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                            torch.profiler.ProfilerActivity.CUDA],
                                record_shapes=True, schedule=sched, on_trace_ready=handler) as prof:
        for _ in range(1 + active):
            zero()
            step()
            torch.cuda.synchronize()
            prof.step()
    with open(tmp, "rb") as fi, gzip.open(path_gz, "wb", compresslevel=9) as fo:
        shutil.copyfileobj(fi, fo)
    raw = os.path.getsize(tmp)
    os.unlink(tmp)
    return {"path": os.path.basename(path_gz), "raw_bytes": raw, "gz_bytes": os.path.getsize(path_gz)}


def run_traces(part: Part, out_dir: str) -> list[dict[str, Any]]:
    import torch

    from .workloads import MLP, decoder_class, transformer_block_class

    os.makedirs(out_dir, exist_ok=True)
    _set_dynamo_limits()
    written: list[dict[str, Any]] = []

    def add(name: str, fn: Callable[[], dict[str, Any]]) -> None:
        if part.out_of_time():
            return
        r = part.attempt(f"trace {name}", fn)
        if r is not None:
            written.append(r)
            log(f"trace {name}: {r}")

    T = part.pick(1001, 2048)
    mlp = MLP(T)
    for variant in ("eager", "compiled"):
        def mk(variant: str = variant) -> dict[str, Any]:
            fwd = mlp.make_forward(variant)

            def step() -> None:
                fwd(mlp.x, mlp.W1, mlp.b1, mlp.W2).backward(mlp.gy)
            for _ in range(3):
                mlp.zero_grad()
                step()
            r = write_trace(os.path.join(out_dir, f"mlp_{variant}.json.gz"), step, mlp.zero_grad)
            r.update({"workload": "mlp", "variant": variant, "T": T})
            return r
        add(f"mlp_{variant}", mk)
    mlp = None

    def tb() -> dict[str, Any]:
        Block = transformer_block_class()
        blk = Block().cuda().to(torch.bfloat16)
        B, S = part.pick((1, 512), (4, 1024))
        x = torch.randn(B, S, 2048, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        gy = torch.randn_like(x)

        def zero() -> None:
            blk.zero_grad(set_to_none=True)
            x.grad = None

        def step() -> None:
            blk(x).backward(gy)
        for _ in range(3):
            zero()
            step()
        r = write_trace(os.path.join(out_dir, "transformer_eager.json.gz"), step, zero)
        r.update({"workload": "transformer_block", "variant": "eager", "batch": B, "seq": S})
        return r
    add("transformer_eager", tb)

    def dec_traces() -> dict[str, Any]:
        Dec = decoder_class()
        dec = Dec().cuda().to(torch.bfloat16).eval()
        B, L = 8, 512
        caches = dec.alloc_cache(B, 2048)
        x = torch.randn(B, 1, 2048, device="cuda", dtype=torch.bfloat16)
        pos = torch.tensor([L - 1], device="cuda", dtype=torch.long)

        def step() -> Any:
            with torch.no_grad():
                return dec(x, caches, pos, L)
        for _ in range(3):
            step()
        noop = lambda: None  # noqa: E731
        r1 = write_trace(os.path.join(out_dir, "decode_eager.json.gz"), step, noop)
        r1.update({"workload": "decode", "variant": "eager", "batch": B, "kv_len": L})
        st = torch.cuda.Stream()
        st.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(st):
            step()
        torch.cuda.current_stream().wait_stream(st)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            step()
        torch.cuda.synchronize()
        r2 = write_trace(os.path.join(out_dir, "decode_cudagraph.json.gz"), g.replay, noop)
        r2.update({"workload": "decode", "variant": "cudagraph", "batch": B, "kv_len": L})
        written.append(r1)
        return r2
    add("decode", dec_traces)

    def two_streams() -> dict[str, Any]:
        m = 4096
        A = torch.randn(m, m, device="cuda", dtype=torch.bfloat16)
        Bm = torch.randn(m, m, device="cuda", dtype=torch.bfloat16)
        e = torch.randn(1 << 24, device="cuda", dtype=torch.bfloat16)
        s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()

        def step() -> None:
            cur = torch.cuda.current_stream()
            s1.wait_stream(cur)
            s2.wait_stream(cur)
            with torch.cuda.stream(s1):
                C = torch.mm(A, Bm)
                done = torch.cuda.Event()
                done.record(s1)
            with torch.cuda.stream(s2):
                y = e
                for _ in range(4):
                    y = torch.nn.functional.gelu(y)
                s2.wait_event(done)
                z = C[:, :1024] + 1.0
                z.add_(y[: z.numel()].view_as(z))
            cur.wait_stream(s1)
            cur.wait_stream(s2)
        for _ in range(3):
            step()
        r = write_trace(os.path.join(out_dir, "two_streams.json.gz"), step, lambda: None)
        r.update({"workload": "two_streams",
                  "description": "s1: mm bf16 4096^3 then event; s2: 4x gelu over 16M bf16, wait event, "
                                 "z = C[:, :1024] + 1, z += y (both on s2); default stream joins both"})
        return r
    add("two_streams", two_streams)
    return written


# ----------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m sim.calibrate.gpu.validate", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=["smoke", "full"], default="full")
    ap.add_argument("--out", required=True)
    ap.add_argument("--traces-out", required=True)
    ap.add_argument("--parts", default=",".join(PARTS))
    ap.add_argument("--budget-s", type=float, default=None)
    ap.add_argument("--pack", default=None)
    ap.add_argument("--pack-root", default=None)
    ns = ap.parse_args(argv)
    parts = [p.strip() for p in ns.parts.split(",") if p.strip()]
    bad = [p for p in parts if p not in PARTS]
    if bad:
        ap.error(f"unknown part(s) {bad}; known: {PARTS}")
    import torch

    if not torch.cuda.is_available():
        print("validate: no CUDA device visible", file=sys.stderr)
        return 2
    os.makedirs(ns.out, exist_ok=True)
    t_start = time.time()
    budget = Budget(t_start + ns.budget_s if ns.budget_s else None)
    meta = common.collect_meta({"mode": ns.mode})
    meta["warmup_s"] = common.warm_gpu(0.2 if ns.mode == "smoke" else 1.5)
    meta["nvidia_smi_after_warmup"] = common._nvidia_smi_query()

    def pack() -> None:
        if ns.pack:
            common.pack_dir(ns.pack_root or ns.out, ns.pack)

    files = {"mlp": "mlp_step.json", "transformer": "transformer_step.json", "decode": "decode_step.json"}
    for i, p in enumerate(parts):
        if ns.budget_s:
            rem = sum(PART_SHARE[x] for x in parts[i:])
            budget.start_group((budget.deadline - time.time()) * PART_SHARE[p] / rem)
        t0 = time.time()
        log(f"part {p} start (soft budget {budget.left():.0f} s)")
        if p == "traces":
            os.makedirs(ns.traces_out, exist_ok=True)
            rf = ResultFile(os.path.join(ns.out, "traces_index.json"), "traces", meta, on_flush=pack)
            part = Part(ns.mode, budget, rf)
            written = part.attempt("traces", lambda: run_traces(part, ns.traces_out)) or []
            rf.doc["records"] = written
            rf.close("truncated" if rf.doc.get("truncated") else "complete")
        else:
            rf = ResultFile(os.path.join(ns.out, files[p]), p, meta, on_flush=pack)
            part = Part(ns.mode, budget, rf)
            fn = {"mlp": run_mlp, "transformer": run_transformer, "decode": run_decode}[p]
            status = "complete"
            try:
                fn(part)
            except Exception as exc:  # noqa: BLE001
                rf.error(p, exc)
                status = "failed"
            if status == "complete" and rf.doc.get("truncated"):
                status = "truncated"
            rf.close(status)
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        log(f"part {p} done in {time.time() - t0:.1f} s")
        pack()
    log(f"validate total wall {time.time() - t_start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
