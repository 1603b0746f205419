"""Issue 18, third wave: what the transformer block's step pays for cuDNN attention, and GEMMs,
copies and reductions at shapes no fit uses.

    python3 -m sim.calibrate.gpu.wave3_gpu --out DIR [--budget-s S] [--smoke] [--parts LIST]

Writes DIR/wave3_gpu.json (records with `bench` in the list below). Never changes GPU settings.

- sdpa_host: host time per call (perf_counter over back-to-back calls, no profiler, no sync) of
  F.scaled_dot_product_attention, causal, bf16, forward without grad, forward with autograd
  recording, and forward+backward, for the default backend, forced flash and forced cuDNN; the
  same for F.linear and F.layer_norm as references; the kernel names each backend ran.
- tb_step: the transformer block's eager training step (sim.calibrate.gpu.workloads) at the four
  validation shapes with the default backend and forced flash: step time (CUDA events), host
  enqueue, back-to-back steps, one profiled step, and the SM clock / power read with nvidia-smi
  (query only) while 2 s of back-to-back steps run.
- gemm: torch.mm profiled kernels at small M and odd N/K not in the held-out set.
- copy: torch copy_ profiled at sizes between the held-out ones.
- reduction: x.sum(0) / x.sum(1) profiled at row counts between the held-out ones.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Any

from . import common
from .heldout_kernels import Ctx, profiled


class Wave3Ctx(Ctx):
    """heldout_kernels' context (budget, guarded attempts) writing DIR/wave3_gpu.json."""

    def __init__(self, out: str, smoke: bool, budget_s: float) -> None:
        self.smoke = smoke
        common.BudgetedAttempts.__init__(self, common.ResultFile(
            os.path.join(out, "wave3_gpu.json"), "wave3_gpu", common.collect_meta({"mode": "smoke" if smoke else "full"})),
            budget_s)
        self.kw = {}


def _backend_ctx(name: str) -> Any:
    import contextlib

    if name == "default":
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel({"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}[name])


def _sdpa_case(c: Ctx, backend: str, B: int, H: int, S: int, D: int, calls: int) -> None:
    import torch
    import torch.nn.functional as F

    q0 = torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16)
    qg, kg, vg = (q0.clone().requires_grad_(True) for _ in range(3))
    go = torch.randn_like(q0)
    with _backend_ctx(backend):
        def fwd_ng() -> None:
            with torch.no_grad():
                F.scaled_dot_product_attention(q0, q0, q0, is_causal=True)

        def fwd_g() -> None:
            F.scaled_dot_product_attention(qg, kg, vg, is_causal=True)

        def fwd_bwd() -> None:
            F.scaled_dot_product_attention(qg, kg, vg, is_causal=True).backward(go)
            qg.grad = kg.grad = vg.grad = None
        rec: dict[str, Any] = {"bench": "sdpa_host", "backend": backend, "batch": B, "heads": H,
                               "seq": S, "head_dim": D, "causal": True, "dtype": "bfloat16"}
        for key, fn in (("fwd_nograd", fwd_ng), ("fwd_grad", fwd_g), ("fwd_bwd", fwd_bwd)):
            fn()
            r = common.host_loop(fn, n=calls, repeats=5)
            rec[key + "_host_us"] = r["enqueue_us_per_call"]
            rec[key + "_drain_us"] = r["drain_us_per_call"]
            rec[key + "_samples_us"] = r["enqueue_samples_us"]
        rec["kernels_fwd_bwd"] = [k["name"][:120] for k in profiled(fwd_bwd, calls=2)]
    c.rf.add(rec)
    common.log(f"sdpa_host {backend} {B}x{H}x{S}x{D}: fwd {rec['fwd_nograd_host_us']:.1f} "
               f"grad {rec['fwd_grad_host_us']:.1f} fwd+bwd {rec['fwd_bwd_host_us']:.1f} us")


def run_sdpa_host(c: Ctx) -> None:
    import torch
    import torch.nn.functional as F

    bf = torch.bfloat16
    n = 50 if c.smoke else 200
    for (B, H, S, D) in ([(1, 16, 128, 128)] if c.smoke else [(1, 16, 128, 128), (1, 16, 128, 64), (8, 16, 512, 128)]):
        for backend in ("default", "flash", "cudnn"):
            c.attempt(f"sdpa_host {backend} {B}x{H}x{S}x{D}",
                      lambda a=(backend, B, H, S, D, n if S <= 128 else 40): _sdpa_case(c, *a))
    # references measured the same way: Linear (addmm) and LayerNorm with autograd recording
    x = torch.randn(128, 2048, device="cuda", dtype=bf, requires_grad=True)
    lin = torch.nn.Linear(2048, 2048).cuda().to(bf)
    ln = torch.nn.LayerNorm(2048).cuda().to(bf)
    gy = torch.randn(128, 2048, device="cuda", dtype=bf)
    for name, f in (("linear", lambda: F.linear(x, lin.weight, lin.bias)),
                    ("layer_norm", lambda: F.layer_norm(x, (2048,), ln.weight, ln.bias))):
        def ref(name: str = name, f: Any = f) -> None:
            def fwd_ng() -> None:
                with torch.no_grad():
                    f()

            def fwd_bwd() -> None:
                f().backward(gy)
                x.grad = None
                for p in (*lin.parameters(), *ln.parameters()):
                    p.grad = None
            rec: dict[str, Any] = {"bench": "op_host", "op": name, "rows": 128, "cols": 2048, "dtype": "bfloat16"}
            for key, fn in (("fwd_nograd", fwd_ng), ("fwd_grad", f), ("fwd_bwd", fwd_bwd)):
                fn()
                rec[key + "_host_us"] = common.host_loop(fn, n=n, repeats=5)["enqueue_us_per_call"]
            c.rf.add(rec)
        c.attempt(f"op_host {name}", ref)
    common.log("sdpa_host done")


class _SmiSampler:
    """nvidia-smi query (read only) every 100 ms in a background process while a load runs."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.proc: Any = None
        self.thread: Any = None

    def __enter__(self) -> _SmiSampler:
        try:
            self.proc = subprocess.Popen(
                ["nvidia-smi", "--query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu",
                 "--format=csv,noheader,nounits", "-lms", "100"], stdout=subprocess.PIPE, text=True)
            self.thread = threading.Thread(target=self._read, daemon=True)
            self.thread.start()
        except Exception as exc:  # noqa: BLE001 - clocks are best effort
            self.lines.append(f"error {exc!r}")
        return self

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.strip())

    def __exit__(self, *exc: Any) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except Exception:  # noqa: BLE001
                self.proc.kill()
        if self.thread is not None:
            self.thread.join(timeout=2)

    def samples(self) -> list[dict[str, Any]]:
        out = []
        for line in self.lines:
            parts = [p.strip() for p in line.split(",")]
            if len(parts) != 5:
                continue
            try:
                out.append({"t": parts[0], "sm_mhz": float(parts[1]), "mem_mhz": float(parts[2]),
                            "power_w": float(parts[3]), "temp_c": float(parts[4])})
            except ValueError:
                continue
        return out


def run_tb_step(c: Ctx) -> None:
    import torch

    from .validate import TB_SHAPES, back_to_back, kernel_list, step_timing
    from .workloads import transformer_block_class

    Block = transformer_block_class()
    torch.manual_seed(0)
    blk = Block().cuda().to(torch.bfloat16)
    for B, S in ([(8, 512)] if c.smoke else TB_SHAPES):
        x = torch.randn(B, S, 2048, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        gy = torch.randn(B, S, 2048, device="cuda", dtype=torch.bfloat16)

        def zero(x: Any = x) -> None:
            blk.zero_grad(set_to_none=True)
            x.grad = None
        for backend in ("default", "flash"):
            def one(backend: str = backend, B: int = B, S: int = S, x: Any = x, gy: Any = gy,
                    zero: Callable[[], None] = zero) -> None:
                with _backend_ctx(backend):
                    def step() -> None:
                        blk(x).backward(gy)
                    for _ in range(3):
                        zero()
                        step()
                    torch.cuda.synchronize()
                    rec: dict[str, Any] = {"bench": "tb_step", "workload": "transformer_block", "variant": "eager",
                                           "backend": backend, "batch": B, "seq": S, "tokens": B * S}
                    rec["step"] = step_timing(step, zero, 5 if c.smoke else 20)
                    rec["time_us"] = rec["step"]["time_us"]
                    rec["back_to_back_us_per_step"] = back_to_back(step, zero, 10)
                    # 2 s of back-to-back steps with the clocks read alongside; steps timed in chunks of 10
                    chunks = []
                    with _SmiSampler() as smi:
                        t_end = time.time() + (0.5 if c.smoke else 2.0)
                        while time.time() < t_end:
                            chunks.append(back_to_back(step, zero, 10))
                    rec["sustained_chunks_us_per_step"] = [round(v, 2) for v in chunks]
                    rec["sustained_clocks"] = smi.samples()
                    rec["profile"] = kernel_list(step, zero)
                    c.rf.add(rec)
                    sm = [s["sm_mhz"] for s in rec["sustained_clocks"]]
                    common.log(f"tb_step {backend} {B}x{S}: step {rec['time_us']:.1f} us, b2b "
                               f"{rec['back_to_back_us_per_step']:.1f}, sustained last {chunks[-1] if chunks else 0:.1f}, "
                               f"sm clock median {sorted(sm)[len(sm) // 2] if sm else 0} MHz")
            c.attempt(f"tb_step {backend} {B}x{S}", one)
    common.log("tb_step done")


def run_gemm(c: Ctx) -> None:
    import torch

    shapes = [(8, 2048, 2048)] if c.smoke else (
        [(m, 2048, 2048) for m in (1, 3, 8, 24, 48)] + [(m, 8192, 2048) for m in (2, 12, 40)]
        + [(m, 2048, 8192) for m in (2, 12, 40, 96)] + [(m, 6144, 4096) for m in (4, 32)]
        + [(2048, 2049, 2048), (2048, 2048, 2052), (1536, 3000, 2048), (4096, 6000, 1000)])
    for m, n, k in shapes:
        def one(m: int = m, n: int = n, k: int = k) -> None:
            a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
            o = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
            c.rf.add({"bench": "gemm", "m": m, "n": n, "k": k, "dtype": "bfloat16", "layout": "nn",
                      "flops": 2.0 * m * n * k, "kernels": profiled(lambda: torch.mm(a, b, out=o))})
        c.attempt(f"gemm {m}x{n}x{k}", one)
    common.log("gemm done")


def run_copy(c: Ctx) -> None:
    import torch

    for kib in ([12] if c.smoke else [12, 48, 96, 384, 768, 1536, 3072, 6144]):
        def one(kib: int = kib) -> None:
            n = kib * 1024 // 2
            src = torch.randn(n, device="cuda", dtype=torch.bfloat16)
            dst = torch.empty_like(src)
            c.rf.add({"bench": "copy", "impl": "torch_copy_", "numel": n, "bytes": 2 * n * 2, "dtype": "bfloat16",
                      "tensor_bytes": 2 * n, "kernels": profiled(lambda: dst.copy_(src))})
        c.attempt(f"copy {kib} KiB", one)
    common.log("copies done")


def run_reduction(c: Ctx) -> None:
    import torch

    cases = [(48, 4096)] if c.smoke else [(r, cols) for r in (24, 48, 96, 192, 384, 768, 3072, 12288)
                                           for cols in (2048, 6144)]
    for rows, cols in cases:
        def one(rows: int = rows, cols: int = cols) -> None:
            x = torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16)
            for dim in (0, 1):
                c.rf.add({"bench": "sum", "dim": dim, "rows": rows, "cols": cols, "dtype": "bfloat16",
                          "kernels": profiled(lambda dim=dim: x.sum(dim))})
        c.attempt(f"sum {rows}x{cols}", one)
    common.log("reductions done")


PARTS: dict[str, Callable[[Ctx], None]] = {"sdpa_host": run_sdpa_host, "tb_step": run_tb_step, "gemm": run_gemm,
                                            "copy": run_copy, "reduction": run_reduction}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--budget-s", type=float, default=120.0)
    ap.add_argument("--parts", default=",".join(PARTS))
    ap.add_argument("--dry-run", action="store_true", help="parse the arguments and list the parts; no GPU")
    ns = ap.parse_args(argv)
    parts = [p for p in ns.parts.split(",") if p]
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        print(f"error: --parts: unknown part '{unknown[0]}' (expected some of {', '.join(PARTS)})")
        return 2
    if ns.dry_run:
        print(f"parts {parts}, budget {ns.budget_s} s, out {ns.out}")
        return 0
    os.makedirs(ns.out, exist_ok=True)
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    c = Wave3Ctx(ns.out, ns.smoke, ns.budget_s)
    common.warm_gpu(1.0)
    for name in parts:
        t0 = time.time()
        c.attempt(name, lambda name=name: PARTS[name](c))
        common.log(f"part {name}: {time.time() - t0:.1f} s")
    c.rf.close("truncated" if c.rf.doc.get("truncated") else "complete")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
