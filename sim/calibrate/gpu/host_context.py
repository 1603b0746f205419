"""Host time of real models, measured in context (issue 15): whole steps without the profiler,
per-op host costs inside autograd/no_grad/inference_mode, and Kineto traces of the same steps.

    python3 -m sim.calibrate.gpu.host_context --out DIR [--traces-out DIR] [--smoke] [--budget-s S]
        [--parts ops,steps,compiled_train,infer_compiled] [--trace-repeats N] [--profiler-warmup]

Models (all bf16 parameters on one GPU, never seen by the older calibration groups):
- gpt: token + position embedding, L pre-LN blocks (LayerNorm, qkv Linear with bias, causal SDPA,
  proj, LayerNorm, fc1, GELU(erf), fc2), final LayerNorm, tied-free LM head, cross-entropy loss,
  AdamW(foreach=True). Training step = zero_grad(set_to_none) + forward + loss + backward + step.
- llama: RMSNorm, rotary embeddings (cos/sin tables, rotate-half), q/k/v/o Linear without bias,
  causal SDPA, SwiGLU MLP (silu(w1 x) * w3 x -> w2), RMSNorm, LM head, AdamW(foreach=True).
- mlp: L x (Linear d->4d, GELU, Linear 4d->d) with residual adds, MSE loss, AdamW(foreach=True).
- decode: the gpt model's blocks as a KV-cache decoder (one token per step, cache [B, h, Lmax, dh]
  written with index_copy_, SDPA over cache[:, :, :L]); eager under inference_mode or no_grad,
  or the whole step captured as one CUDA graph.
- compiled: torch.compile(model) (default mode, dynamic=False) of the mlp training step and the
  gpt forward in inference_mode.

Per config, after warm-up: `b2b_us` = wall time per step of N steps issued back to back
(synchronize only at the end; median of 5 loops) — the steady-state step time; `sync_us` = wall
per step when every step starts from an idle GPU and ends with torch.cuda.synchronize (median);
`enqueue_us` = host time until the step's Python call returns (median of the sync loop).
Then one Kineto trace (record_shapes=True, ProfilerStep# markers; wait 1, warmup 1, active 3);
with `--trace-repeats N`, N traces one after the other (`<config>.json.gz`, `<config>.r2.json.gz`, ...).
Every trace's record names its profiling session's index in the process (`trace_sessions`: 0 = the
process's first). With `--profiler-warmup` one throwaway profiling session (the same settings, a few
small matmuls, exported and deleted) runs before the first traced config: the first session of a
process was seen to cost more per event than later ones (issue 15).

Every step record also carries `host_clock` (issue 15, wave 8 on): the host's speed at that moment,
read from a fixed tight loop of three framework ops on tiny tensors (HOST_CLOCK_OPS: `torch.empty`,
a view, a 16-element add that launches a kernel; median us per call over 3 loops of 200 calls),
right before the step is timed and right after (`before` / `after`), and `clocked`: CLOCKED_STEPS
more steps from an idle GPU, each right after a short clock of the same ops (its mean us per call),
with its wall time. A step measured at two host speeds (the decode steps' two bands) shows it there.

Part `infer_compiled` (issue 15): held-out compiled inference, models no host fit reads — the llama
forward (B x S = 1 x 128) and the mlp forward (T = 128), each eager and torch.compile'd (default mode,
dynamic=False) under inference_mode, then the gpt decode steps at B = 1 and 8 (eager inference_mode
and no_grad), then the llama forward at 4 x 256 if the budget allows; all timed and traced like every
step config (pairs for the compile-over-eager gain on one machine).

Per-op records (`bench: op_in_context`): host time per call of one framework op on modest
tensors (64 x 1024 rows) in three modes: `grad` (inputs require grad: autograd records a
node), `no_grad` and `inference_mode`; plus nn.Module call overhead and foreach AdamW steps
over P parameter tensors. Nothing here is fitted: sim/calibrate/ fits offline.
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import statistics
import time
from collections.abc import Callable
from typing import Any

from . import common
from .models import host_context_models as _models
from .trace_utils import export_trace


def _loop(fn: Callable[[], Any], n: int, sync_each: bool) -> tuple[float, float]:
    """(enqueue, wall) us per step over n steps."""
    import torch

    torch.cuda.synchronize()
    if not sync_each:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        return (t1 - t0) * 1e6 / n, (time.perf_counter() - t0) * 1e6 / n
    enq, wall = [], []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        enq.append((t1 - t0) * 1e6)
        wall.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(enq), statistics.median(wall)


def time_step(fn: Callable[[], Any], target_s: float = 0.25, repeats: int = 5) -> dict[str, Any]:
    import torch

    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    one = max(time.perf_counter() - t0, 1e-5)
    n = int(min(400, max(5, target_s / one)))
    b2b = [_loop(fn, n, sync_each=False) for _ in range(repeats)]
    enq_s, sync = _loop(fn, max(5, n // 2), sync_each=True)
    return {
        "b2b_us": statistics.median(w for _, w in b2b),
        "b2b_samples_us": [round(w, 2) for _, w in b2b],
        "b2b_enqueue_us": statistics.median(e for e, _ in b2b),
        "sync_us": sync,
        "enqueue_us": enq_s,
        "n_steps": n,
        "repeats": repeats,
    }


def write_trace(path_gz: str, fn: Callable[[], Any]) -> dict[str, Any]:
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True,
                 schedule=schedule(wait=1, warmup=1, active=3)) as prof:
        for _ in range(5):
            fn()
            prof.step()
        torch.cuda.synchronize()
    global _SESSIONS
    _SESSIONS += 1
    tmp = path_gz[:-3]
    export_trace(prof, tmp)
    with open(tmp, "rb") as src, gzip.open(path_gz, "wb", compresslevel=6) as dst:
        shutil.copyfileobj(src, dst)
    os.unlink(tmp)
    return {"trace": os.path.basename(path_gz), "trace_bytes": os.path.getsize(path_gz)}


_SESSIONS = 0  # profiling sessions this process has run (write_trace and the throwaway one)

# The host clock: framework ops whose host path is fixed (tiny tensors, no autograd), timed in a tight
# loop; their cost per call against a reference run of the same loop is the host's speed at that moment.
HOST_CLOCK_OPS = ("empty", "view", "add")
HOST_CLOCK_CALLS = 200
HOST_CLOCK_LOOPS = 3


def host_clock() -> dict[str, float]:
    """Median us per call of each HOST_CLOCK_OPS op over HOST_CLOCK_LOOPS tight loops of
    HOST_CLOCK_CALLS calls (about 15 ms in all), from an idle GPU."""
    import torch

    x = torch.zeros(16, device="cuda")
    y = torch.ones(16, device="cuda")
    calls: dict[str, Callable[[], Any]] = {
        "empty": lambda: torch.empty(16, device="cuda"),
        "view": lambda: x.view(4, 4),
        "add": lambda: torch.add(x, y),
    }
    out = {}
    for name in HOST_CLOCK_OPS:
        fn = calls[name]
        fn()
        torch.cuda.synchronize()
        per_call = []
        for _ in range(HOST_CLOCK_LOOPS):
            t0 = time.perf_counter()
            for _ in range(HOST_CLOCK_CALLS):
                fn()
            per_call.append((time.perf_counter() - t0) * 1e6 / HOST_CLOCK_CALLS)
            torch.cuda.synchronize()
        out[f"{name}_us"] = round(statistics.median(per_call), 4)
    return out


CLOCKED_STEPS = 40
CLOCKED_ROUNDS = 20  # rounds of the HOST_CLOCK_OPS (one call each) before each clocked step


def clocked_steps(fn: Callable[[], Any], n: int = CLOCKED_STEPS) -> dict[str, list[float]]:
    """n steps from an idle GPU, each right after a short host clock (CLOCKED_ROUNDS rounds of the
    HOST_CLOCK_OPS, about 0.3 ms): per step its wall time to a synchronize and the clock's mean us per
    op call just before it. The host's speed was seen to switch between two levels within a second
    (the decode steps' two bands), faster than a clock before and after a whole timing loop resolves."""
    import torch

    x = torch.zeros(16, device="cuda")
    y = torch.ones(16, device="cuda")
    clock, wall = [], []
    for _ in range(n):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(CLOCKED_ROUNDS):
            torch.empty(16, device="cuda")
            x.view(4, 4)
            torch.add(x, y)
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        clock.append(round((t1 - t0) * 1e6 / (3 * CLOCKED_ROUNDS), 4))
        wall.append(round((time.perf_counter() - t2) * 1e6, 2))
    return {"clock_us": clock, "step_us": wall}


def profiler_warmup(scratch: str) -> dict[str, Any]:
    """One throwaway profiling session with the traces' settings (a few small matmuls), exported to
    `scratch` and deleted: whatever the profiler does once per process is paid here, not in a trace."""
    import torch

    a = torch.randn(256, 256, device="cuda")
    t0 = time.time()
    path = os.path.join(scratch, "profiler_warmup.json.gz")
    write_trace(path, lambda: [torch.mm(a, a) for _ in range(8)])
    os.unlink(path)
    return {"profiler_warmup_s": round(time.time() - t0, 3)}


class Runner:
    def __init__(self, out: str, traces_out: str | None, smoke: bool, budget_s: float, trace_repeats: int = 1,
                 warmup: bool = False) -> None:
        meta = common.collect_meta({"mode": "smoke" if smoke else "full", "trace_repeats": trace_repeats,
                                    "profiler_warmup": warmup})
        self.rf = common.ResultFile(os.path.join(out, "host_context.json"), "host_context", meta)
        self.traces_out, self.smoke, self.trace_repeats = traces_out, smoke, trace_repeats
        self.deadline = time.time() + budget_s

    def left(self) -> float:
        return self.deadline - time.time()

    def attempt(self, where: str, fn: Callable[[], Any]) -> Any:
        if self.left() < 5:
            common.log(f"skip {where}: out of time")
            self.rf.doc["truncated"] = True
            return None
        return common.guarded(self.rf, where, fn)

    def step_config(self, name: str, info: dict[str, Any], fn: Callable[[], Any], trace: bool = True) -> None:
        import torch

        t0 = time.time()
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        rec = {"bench": "step", "config": name, **info, "warmup_s": round(time.time() - t0, 2)}
        before = host_clock()
        rec.update(time_step(fn, target_s=0.05 if self.smoke else 0.25, repeats=2 if self.smoke else 5))
        rec["host_clock"] = {"ops": list(HOST_CLOCK_OPS), "calls": HOST_CLOCK_CALLS, "loops": HOST_CLOCK_LOOPS,
                             "before": before, "after": host_clock(),
                             "clocked": clocked_steps(fn, 10 if self.smoke else CLOCKED_STEPS)}
        if trace and self.traces_out:
            sessions = [_SESSIONS]
            rec.update(write_trace(os.path.join(self.traces_out, f"{name}.json.gz"), fn))
            repeats = []
            for k in range(2, self.trace_repeats + 1):
                if self.left() < 5:
                    break
                sessions.append(_SESSIONS)
                repeats.append(write_trace(os.path.join(self.traces_out, f"{name}.r{k}.json.gz"), fn)["trace"])
            rec["trace_sessions"] = sessions
            if repeats:
                rec["trace_repeats"] = repeats
        self.rf.add(rec)
        common.log(f"{name}: b2b {rec['b2b_us']:.1f} us, sync {rec['sync_us']:.1f} us, enqueue {rec['enqueue_us']:.1f} us")


def run_steps(r: Runner) -> None:
    import torch
    import torch.nn.functional as F

    M = _models()
    dev, bf = "cuda", torch.bfloat16
    torch.manual_seed(0)
    vocab = 8192

    def train_step(model: Any, opt: Any, make_loss: Callable[[], Any]) -> Callable[[], None]:
        def fn() -> None:
            opt.zero_grad(set_to_none=True)
            make_loss().backward()
            opt.step()
        return fn

    sizes_gpt = [(1, 128), (4, 256)] if r.smoke else [(1, 128), (2, 256), (4, 512), (8, 1024)]
    for B, S in sizes_gpt:
        def gpt_cfg(B: int = B, S: int = S) -> None:
            m = M["gpt"]().to(dev, bf)
            opt = torch.optim.AdamW(m.parameters(), lr=1e-4, foreach=True)
            idx = torch.randint(0, vocab, (B, S), device=dev)
            tgt = torch.randint(0, vocab, (B, S), device=dev)
            fn = train_step(m, opt, lambda: F.cross_entropy(m(idx).view(-1, vocab), tgt.view(-1)))
            r.step_config(f"gpt_train_b{B}_s{S}", {"model": "gpt", "mode": "eager", "phase": "train", "B": B, "S": S,
                                                    "layers": 4, "d_model": 1024, "heads": 16, "d_ff": 4096,
                                                    "vocab": vocab, "optimizer": "AdamW(foreach=True)"}, fn)
        r.attempt(f"gpt_train_b{B}_s{S}", gpt_cfg)
    for B, S in ([(1, 128)] if r.smoke else [(1, 128), (4, 256), (8, 1024)]):
        def llama_cfg(B: int = B, S: int = S) -> None:
            m = M["llama"]().to(dev, bf)
            opt = torch.optim.AdamW(m.parameters(), lr=1e-4, foreach=True)
            idx = torch.randint(0, vocab, (B, S), device=dev)
            tgt = torch.randint(0, vocab, (B, S), device=dev)
            fn = train_step(m, opt, lambda: F.cross_entropy(m(idx).view(-1, vocab), tgt.view(-1)))
            info = {"model": "llama", "phase": "train", "B": B, "S": S, "layers": 4, "d_model": 1024,
                    "heads": 8, "d_ff": 2816, "vocab": vocab, "optimizer": "AdamW(foreach=True)"}
            r.step_config(f"llama_train_b{B}_s{S}", {**info, "mode": "eager"}, fn)

            def fwd() -> None:
                with torch.inference_mode():
                    m(idx)
            r.step_config(f"llama_infer_b{B}_s{S}", {**info, "phase": "inference_mode", "mode": "eager",
                                                      "optimizer": None}, fwd)
        r.attempt(f"llama_b{B}_s{S}", llama_cfg)
    for T in ([128] if r.smoke else [128, 1024, 8192]):
        def mlp_cfg(T: int = T) -> None:
            m = M["mlp"]().to(dev, bf)
            opt = torch.optim.AdamW(m.parameters(), lr=1e-4, foreach=True)
            x = torch.randn(T, 1024, device=dev, dtype=bf)
            y = torch.randn(T, 1024, device=dev, dtype=bf)
            info = {"model": "mlp", "phase": "train", "T": T, "layers": 4, "d_model": 1024, "d_ff": 4096,
                    "optimizer": "AdamW(foreach=True)"}
            r.step_config(f"mlp_train_t{T}", {**info, "mode": "eager"},
                          train_step(m, opt, lambda: F.mse_loss(m(x), y)))
            if T <= 1024:
                mc = torch.compile(m, dynamic=False)
                r.step_config(f"mlp_train_t{T}_compiled", {**info, "mode": "compiled"},
                              train_step(m, opt, lambda: F.mse_loss(mc(x), y)))
        r.attempt(f"mlp_t{T}", mlp_cfg)

    # decode: gpt blocks with a KV cache
    for B in ([1] if r.smoke else [1, 8, 64]):
        def decode_cfg(B: int = B) -> None:
            m = M["gpt"]().to(dev, bf).eval()
            Lmax, L = 1024, 512
            caches = [(torch.randn(B, m.h, Lmax, m.dh, device=dev, dtype=bf),
                       torch.randn(B, m.h, Lmax, m.dh, device=dev, dtype=bf)) for _ in m.blocks]
            idx = torch.randint(0, vocab, (B, 1), device=dev)
            pos = torch.tensor([L - 1], device=dev)
            info = {"model": "gpt_decode", "phase": "decode", "B": B, "L": L, "Lmax": Lmax, "layers": 4,
                    "d_model": 1024, "heads": 16, "d_ff": 4096, "vocab": vocab}

            def step_inf() -> None:
                with torch.inference_mode():
                    m.decode(idx, caches, pos, L)

            def step_ng() -> None:
                with torch.no_grad():
                    m.decode(idx, caches, pos, L)
            r.step_config(f"decode_b{B}_inference", {**info, "mode": "eager", "grad_mode": "inference_mode"}, step_inf)
            r.step_config(f"decode_b{B}_nograd", {**info, "mode": "eager", "grad_mode": "no_grad"}, step_ng,
                          trace=B == 8)
            st = torch.cuda.Stream()
            st.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(st):
                for _ in range(3):
                    step_ng()
            torch.cuda.current_stream().wait_stream(st)
            g = torch.cuda.CUDAGraph()
            with torch.no_grad(), torch.cuda.graph(g):
                m.decode(idx, caches, pos, L)
            r.step_config(f"decode_b{B}_graph", {**info, "mode": "cuda_graph", "grad_mode": "no_grad"}, g.replay)
        r.attempt(f"decode_b{B}", decode_cfg)

    def gpt_infer_cfg() -> None:
        m = M["gpt"]().to(dev, bf).eval()
        idx = torch.randint(0, vocab, (1, 128), device=dev)
        info = {"model": "gpt", "phase": "inference_mode", "B": 1, "S": 128, "layers": 4, "d_model": 1024,
                "heads": 16, "d_ff": 4096, "vocab": vocab}

        def fwd() -> None:
            with torch.inference_mode():
                m(idx)
        r.step_config("gpt_infer_b1_s128", {**info, "mode": "eager"}, fwd)
        mc = torch.compile(m, dynamic=False)

        def fwd_c() -> None:
            with torch.inference_mode():
                mc(idx)
        r.step_config("gpt_infer_b1_s128_compiled", {**info, "mode": "compiled"}, fwd_c)
    if not r.smoke:
        r.attempt("gpt_infer", gpt_infer_cfg)


def run_infer_compiled(r: Runner) -> None:
    """Part `infer_compiled` (issue 15): compiled inference steps of models no host fit reads (the
    llama and mlp forwards under inference_mode, eager and compiled on the same machine), then the gpt
    decode steps at B = 1 and 8 (eager inference_mode and no_grad), each with its host clock."""
    import torch

    M = _models()
    dev, bf = "cuda", torch.bfloat16
    torch.manual_seed(0)
    vocab = 8192

    def pair(name: str, info: dict[str, Any], m: Any, x: Any) -> None:
        def fwd() -> None:
            with torch.inference_mode():
                m(x)
        r.step_config(name, {**info, "mode": "eager"}, fwd)
        mc = torch.compile(m, dynamic=False)

        def fwd_c() -> None:
            with torch.inference_mode():
                mc(x)
        r.step_config(f"{name}_compiled", {**info, "mode": "compiled"}, fwd_c)

    def llama_cfg(B: int, S: int) -> None:
        m = M["llama"]().to(dev, bf).eval()
        idx = torch.randint(0, vocab, (B, S), device=dev)
        pair(f"llama_infer_b{B}_s{S}", {"model": "llama", "phase": "inference_mode", "B": B, "S": S, "layers": 4,
                                        "d_model": 1024, "heads": 8, "d_ff": 2816, "vocab": vocab}, m, idx)
    r.attempt("llama_infer_b1_s128_pair", lambda: llama_cfg(1, 128))

    def mlp_cfg(T: int = 128) -> None:
        m = M["mlp"]().to(dev, bf).eval()
        x = torch.randn(T, 1024, device=dev, dtype=bf)
        pair(f"mlp_infer_t{T}", {"model": "mlp", "phase": "inference_mode", "T": T, "layers": 4, "d_model": 1024,
                                 "d_ff": 4096}, m, x)
    r.attempt("mlp_infer_t128_pair", mlp_cfg)

    for B in ([1] if r.smoke else [1, 8]):
        def decode_cfg(B: int = B) -> None:
            m = M["gpt"]().to(dev, bf).eval()
            Lmax, L = 1024, 512
            caches = [(torch.randn(B, m.h, Lmax, m.dh, device=dev, dtype=bf),
                       torch.randn(B, m.h, Lmax, m.dh, device=dev, dtype=bf)) for _ in m.blocks]
            idx = torch.randint(0, vocab, (B, 1), device=dev)
            pos = torch.tensor([L - 1], device=dev)
            info = {"model": "gpt_decode", "phase": "decode", "B": B, "L": L, "Lmax": Lmax, "layers": 4,
                    "d_model": 1024, "heads": 16, "d_ff": 4096, "vocab": vocab, "mode": "eager"}

            def step_inf() -> None:
                with torch.inference_mode():
                    m.decode(idx, caches, pos, L)

            def step_ng() -> None:
                with torch.no_grad():
                    m.decode(idx, caches, pos, L)
            r.step_config(f"decode_b{B}_inference", {**info, "grad_mode": "inference_mode"}, step_inf)
            r.step_config(f"decode_b{B}_nograd", {**info, "grad_mode": "no_grad"}, step_ng)
        r.attempt(f"decode_b{B}", decode_cfg)
    if not r.smoke:  # last: a second llama size, if the budget allows
        r.attempt("llama_infer_b4_s256_pair", lambda: llama_cfg(4, 256))


def run_compiled_train(r: Runner) -> None:
    """Part `compiled_train` (issue 15): what torch.compile costs on the host in a training step, on
    calibration-split models only (never the mlp, llama or decode validation models):
    - `compiled_params`: an nn.Module holding P parameter tensors (16 x 64, bf16) whose forward
      adds them all to the input (one fused Triton kernel forward; the backward hands the same
      gradient to every parameter), compiled (default mode, dynamic=False), for P = 1, 8, 32:
      host time per forward call under no_grad (`fwd_nograd_us`), per forward call with grad
      enabled (`fwd_grad_us`: AOTAutograd's runtime wrapper and its autograd node; the output is
      dropped), per forward + .backward() (`fwd_bwd_us`, gradients set to None after each), and
      the same three for the module run eagerly - the compiled call's cost per input tensor.
    - `loss_op`: F.mse_loss and F.cross_entropy on 64 x 1024 bf16 (cross_entropy is the reference
      the GPT traces also price): host time per forward call in grad / no_grad mode and per
      forward + .backward() with the input requiring grad.
    - the gpt model's training step compiled (`gpt_train_b1_s128_compiled`, then b2_s256 if the
      budget allows), timed and traced like every step config."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    dev, bf = "cuda", torch.bfloat16
    n = 60 if r.smoke else 200
    reps = 2 if r.smoke else 5

    def loss_ops() -> None:
        R, D = 64, 1024
        xg = torch.randn(R, D, device=dev, dtype=bf, requires_grad=True)
        xp = torch.randn(R, D, device=dev, dtype=bf)
        y = torch.randn(R, D, device=dev, dtype=bf)
        tgt = torch.randint(0, D, (R,), device=dev)
        losses = {"aten::mse_loss": lambda x: F.mse_loss(x, y), "aten::cross_entropy_loss": lambda x: F.cross_entropy(x, tgt)}
        for name, f in losses.items():
            def fb(f: Any = f) -> None:
                f(xg).backward()
                xg.grad = None
            timed: dict[str, Any] = {}
            for field, fn, ctx in (("fwd_grad_us", lambda f=f: f(xg), torch.enable_grad),
                                   ("fwd_nograd_us", lambda f=f: f(xp), torch.no_grad),
                                   ("fwd_bwd_us", fb, torch.enable_grad)):
                with ctx():
                    fn()
                    res = common.host_loop(fn, n=n, repeats=reps)
                timed[field] = res["enqueue_us_per_call"]
                timed[field.removesuffix("_us") + "_samples_us"] = res["enqueue_samples_us"]
            r.rf.add({"bench": "loss_op", "op": name, "rows": R, "cols": D, **timed})
            common.log(f"loss {name}: {timed['fwd_grad_us']:.1f} / {timed['fwd_bwd_us']:.1f} us")
    r.attempt("loss_ops", loss_ops)

    class Params(nn.Module):
        def __init__(self, p: int) -> None:
            super().__init__()
            self.ps = nn.ParameterList([nn.Parameter(torch.randn(16, 64)) for _ in range(p)])

        def forward(self, x: Any) -> Any:
            for p in self.ps:
                x = x + p
            return x

    for P in ((1, 8) if r.smoke else (1, 8, 32)):
        def params(P: int = P) -> None:
            m = Params(P).to(dev, bf)
            x = torch.randn(16, 64, device=dev, dtype=bf)
            mc = torch.compile(m, dynamic=False)
            rec: dict[str, Any] = {"bench": "compiled_params", "params": P, "param_shape": [16, 64]}
            for tag, mod in (("", mc), ("eager_", m)):
                def fwd_ng(mod: Any = mod) -> None:
                    with torch.no_grad():
                        mod(x)

                def fwd_g(mod: Any = mod) -> None:
                    mod(x)

                def fwd_bwd(mod: Any = mod) -> None:
                    mod(x).sum().backward()
                    m.zero_grad(set_to_none=True)
                for field, fn in (("fwd_nograd_us", fwd_ng), ("fwd_grad_us", fwd_g), ("fwd_bwd_us", fwd_bwd)):
                    for _ in range(3):
                        fn()
                    torch.cuda.synchronize()
                    res = common.host_loop(fn, n=n, repeats=reps)
                    rec[tag + field] = res["enqueue_us_per_call"]
                    rec[tag + field.removesuffix("_us") + "_samples_us"] = res["enqueue_samples_us"]
            rec["fwd_bwd_note"] = "fwd_bwd includes a sum() and its backward node besides the compiled graph's"
            r.rf.add(rec)
            common.log(f"compiled_params P={P}: fwd no_grad {rec['fwd_nograd_us']:.1f}, grad {rec['fwd_grad_us']:.1f}, "
                       f"fwd+bwd {rec['fwd_bwd_us']:.1f} us")
        r.attempt(f"compiled_params P={P}", params)

    M = _models()
    vocab = 8192
    for B, S in ([(1, 128)] if r.smoke else [(1, 128), (2, 256)]):
        def gpt_cfg(B: int = B, S: int = S) -> None:
            torch.manual_seed(0)
            m = M["gpt"]().to(dev, bf)
            mc = torch.compile(m, dynamic=False)
            opt = torch.optim.AdamW(m.parameters(), lr=1e-4, foreach=True)
            idx = torch.randint(0, vocab, (B, S), device=dev)
            tgt = torch.randint(0, vocab, (B, S), device=dev)

            def fn() -> None:
                opt.zero_grad(set_to_none=True)
                F.cross_entropy(mc(idx).view(-1, vocab), tgt.view(-1)).backward()
                opt.step()
            r.step_config(f"gpt_train_b{B}_s{S}_compiled",
                          {"model": "gpt", "mode": "compiled", "phase": "train", "B": B, "S": S, "layers": 4,
                           "d_model": 1024, "heads": 16, "d_ff": 4096, "vocab": vocab,
                           "optimizer": "AdamW(foreach=True)"}, fn)
        if r.left() < (20 if B == 1 else 40):
            common.log(f"skip gpt_train_b{B}_s{S}_compiled: {r.left():.0f} s left")
            r.rf.doc["truncated"] = True
            continue
        r.attempt(f"gpt_train_b{B}_s{S}_compiled", gpt_cfg)


def run_ops(r: Runner) -> None:
    import torch
    import torch.nn.functional as F
    from torch import nn

    dev, bf = "cuda", torch.bfloat16
    R, D = 64, 1024
    n = 100 if r.smoke else 300
    reps = 2 if r.smoke else 5

    def make(grad: bool) -> dict[str, Any]:
        x = torch.randn(R, D, device=dev, dtype=bf, requires_grad=grad)
        w = torch.randn(D, D, device=dev, dtype=bf, requires_grad=grad)
        b = torch.randn(D, device=dev, dtype=bf, requires_grad=grad)
        q = torch.randn(1, 8, R, 128, device=dev, dtype=bf, requires_grad=grad)
        emb = torch.randn(8192, D, device=dev, dtype=bf, requires_grad=grad)
        idx = torch.randint(0, 8192, (R,), device=dev)
        tgt = torch.randint(0, D, (R,), device=dev)
        dst = torch.empty(R, D, device=dev, dtype=bf)
        xs = torch.randn(R, D, device=dev, dtype=bf)
        return {
            "aten::addmm (F.linear with bias)": lambda: F.linear(x, w, b),
            "aten::mm (F.linear no bias)": lambda: F.linear(x, w),
            "aten::layer_norm": lambda: F.layer_norm(x, (D,), b, b),
            "aten::rms_norm": lambda: F.rms_norm(x, (D,), b),
            "aten::_scaled_dot_product_*_attention (causal)": lambda: F.scaled_dot_product_attention(q, q, q, is_causal=True),
            "aten::add": lambda: x + x,
            "aten::mul": lambda: x * x,
            "aten::gelu": lambda: F.gelu(x),
            "aten::silu": lambda: F.silu(x),
            "aten::softmax": lambda: torch.softmax(x, -1),
            "aten::embedding": lambda: F.embedding(idx, emb),
            "aten::cross_entropy_loss": lambda: F.cross_entropy(x, tgt),
            "aten::view": lambda: x.view(R * 2, D // 2),
            "aten::reshape": lambda: x.reshape(R * 2, D // 2),
            "aten::permute": lambda: x.permute(1, 0),
            "aten::transpose": lambda: x.transpose(0, 1),
            "aten::copy_": lambda: dst.copy_(xs),
            "aten::cat": lambda: torch.cat((x, x), dim=-1),
            "aten::chunk": lambda: x.chunk(2, dim=-1),
        }

    for mode in ("grad", "no_grad", "inference_mode"):
        ops = make(mode == "grad")
        for name, fn in ops.items():
            def one(name: str = name, fn: Callable[[], Any] = fn, mode: str = mode) -> None:
                if mode == "no_grad":
                    ctx: Any = torch.no_grad
                elif mode == "inference_mode":
                    ctx = torch.inference_mode
                else:
                    ctx = torch.enable_grad
                with ctx():
                    fn()
                    res = common.host_loop(fn, n=n, repeats=reps)
                r.rf.add({"bench": "op_in_context", "op": name, "grad_mode": mode, "rows": R, "cols": D,
                          "host_us_per_op": res["enqueue_us_per_call"], "samples_us": res["enqueue_samples_us"],
                          "drain_us_per_op": res["drain_us_per_call"]})
            r.attempt(f"op {name} {mode}", one)
        common.log(f"ops in mode {mode} done")

    # nn.Module call overhead: an Identity module vs the bare function, and a Linear module vs F.linear
    def module_cost() -> None:
        x = torch.randn(R, D, device=dev, dtype=bf)
        lin = nn.Linear(D, D).to(dev, bf)
        ident = nn.Identity()
        with torch.no_grad():
            for name, fn in (("Identity()(x)", lambda: ident(x)), ("lambda x: x", lambda: (lambda t: t)(x)),
                             ("nn.Linear(x)", lambda: lin(x)),
                             ("F.linear(x, w, b)", lambda: F.linear(x, lin.weight, lin.bias))):
                res = common.host_loop(fn, n=n * 3, repeats=reps)
                r.rf.add({"bench": "module_call", "call": name, "host_us_per_call": res["enqueue_us_per_call"],
                          "samples_us": res["enqueue_samples_us"]})
    r.attempt("module_call", module_cost)

    # foreach AdamW over P parameter tensors of 64x1024 (host per step vs P)
    for P in ((4, 16) if r.smoke else (4, 16, 64, 256)):
        def adamw(P: int = P) -> None:
            ps = [torch.randn(64, 1024, device=dev, dtype=bf, requires_grad=True) for _ in range(P)]
            for p in ps:
                p.grad = torch.randn_like(p)
            for fused in (False, True):
                opt = torch.optim.AdamW(ps, lr=1e-4, foreach=not fused, fused=fused)
                opt.step()
                res = common.host_loop(opt.step, n=30 if r.smoke else 100, repeats=reps)
                r.rf.add({"bench": "optimizer_step", "optimizer": "AdamW", "impl": "fused" if fused else "foreach",
                          "params": P, "param_shape": [64, 1024], "host_us_per_step": res["enqueue_us_per_call"],
                          "drain_us_per_step": res["drain_us_per_call"], "samples_us": res["enqueue_samples_us"]})
        r.attempt(f"adamw P={P}", adamw)
    common.log("per-op host costs done")


PARTS = ("ops", "steps", "compiled_train", "infer_compiled")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="folder for host_context.json")
    ap.add_argument("--traces-out", default=None, help="folder for <config>.json.gz Kineto traces")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, few repetitions")
    ap.add_argument("--budget-s", type=float, default=300.0, help="wall budget (s)")
    ap.add_argument("--parts", default="ops,steps",
                    help="comma list of: ops (per-op costs), steps (models' steps), compiled_train (run_compiled_train), "
                         "infer_compiled (run_infer_compiled)")
    ap.add_argument("--trace-repeats", type=int, default=1, help="traces per config, one after the other")
    ap.add_argument("--profiler-warmup", action="store_true",
                    help="one throwaway profiling session before the first traced config")
    ns = ap.parse_args(argv)
    parts = [p for p in ns.parts.split(",") if p]
    if not parts or any(p not in PARTS for p in parts) or ns.trace_repeats < 1:
        ap.error(f"--parts takes {', '.join(PARTS)} (got {ns.parts!r}); --trace-repeats >= 1 (got {ns.trace_repeats})")
    os.makedirs(ns.out, exist_ok=True)
    if ns.traces_out:
        os.makedirs(ns.traces_out, exist_ok=True)
    import torch

    from .validate import _set_dynamo_limits

    _set_dynamo_limits()
    torch.backends.cuda.matmul.allow_tf32 = False
    r = Runner(ns.out, ns.traces_out, ns.smoke, ns.budget_s, ns.trace_repeats, ns.profiler_warmup)
    common.warm_gpu(1.0)
    if "ops" in parts:
        r.attempt("ops", lambda: run_ops(r))
    if "steps" in parts:
        if ns.profiler_warmup and ns.traces_out:
            r.rf.doc["meta"].update(r.attempt("profiler_warmup", lambda: profiler_warmup(ns.traces_out)) or {})
        r.attempt("steps", lambda: run_steps(r))
    if "compiled_train" in parts:
        if ns.profiler_warmup and ns.traces_out and "steps" not in parts:
            r.rf.doc["meta"].update(r.attempt("profiler_warmup", lambda: profiler_warmup(ns.traces_out)) or {})
        r.attempt("compiled_train", lambda: run_compiled_train(r))
    if "infer_compiled" in parts:
        if ns.profiler_warmup and ns.traces_out and not {"steps", "compiled_train"} & set(parts):
            r.rf.doc["meta"].update(r.attempt("profiler_warmup", lambda: profiler_warmup(ns.traces_out)) or {})
        r.attempt("infer_compiled", lambda: run_infer_compiled(r))
    r.rf.close("truncated" if r.rf.doc.get("truncated") else "complete")
    common.log(f"host_context: {len(r.rf.doc['records'])} records, {len(r.rf.doc['errors'])} errors")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
