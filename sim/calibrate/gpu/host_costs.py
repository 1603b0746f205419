"""Host costs of PyTorch eager ops, autograd nodes and compiled calls, on tiny tensors (host-bound).

    python3 -m sim.calibrate.gpu.host_costs --out DIR [--runs N]

Writes DIR/host_costs.json = {"meta", "group": "host_costs", "records"}. Each record is the
host time per call (perf_counter over back-to-back calls without synchronizing, median of
repeats) of one aten op as the workloads issue it, or of a forward+backward through a chain
of N differentiable ops (the backward's per-node cost is the slope over N), or of a
torch.compile'd function with K separate kernels (graph breaks force K kernels).

Host time on these VMs drifts by tens of percent within seconds, so every timing is taken in
`--runs` rounds (default 3): everything is set up (and compiled) first, then each round times
every benchmark once, in the same order; each record carries `run` (1..N). The fit takes the
median over the rounds of each design point.
"""

from __future__ import annotations

import argparse
from typing import Any

from . import common


def _per_call(fn: Any, n: int = 300, repeats: int = 5) -> float:
    return float(common.host_loop(fn, n=n, repeats=repeats)["enqueue_us_per_call"])


class Timings:
    """Benchmarks set up now and timed later, in rounds: `add(record, field=(fn, n))` keeps the
    record's inputs and what to time; `measure(runs)` returns one record per benchmark and round."""

    def __init__(self) -> None:
        self.items: list[tuple[dict[str, Any], dict[str, tuple[Any, int]]]] = []

    def add(self, rec: dict[str, Any], **fields: tuple[Any, int]) -> None:
        self.items.append((rec, fields))

    def measure(self, runs: int) -> list[dict[str, Any]]:
        out = []
        for run in range(1, runs + 1):
            for rec, fields in self.items:
                timed = {name: _per_call(fn, n=n) for name, (fn, n) in fields.items()}
                out.append({**rec, **timed, "run": run})
            common.log(f"round {run}: {len(self.items)} benchmarks timed")
        return out


def run(out_dir: str, runs: int = 3) -> dict[str, Any]:
    import torch
    import torch.nn.functional as F

    dev = "cuda"
    bf = torch.bfloat16
    records: list[dict[str, Any]] = []
    timings = Timings()
    x = torch.randn(64, 64, device=dev, dtype=bf)
    w = torch.randn(64, 64, device=dev, dtype=bf)
    b = torch.randn(64, device=dev, dtype=bf)
    cache = torch.randn(64, 64, device=dev, dtype=bf)
    idx = torch.tensor([0], device=dev)
    row = torch.randn(1, 64, device=dev, dtype=bf)
    ops = {
        "mm": lambda: x @ w,
        "addmm_linear": lambda: F.linear(x, w, b),
        "add_broadcast": lambda: x + b,
        "gelu": lambda: F.gelu(x),
        "native_dropout": lambda: torch.native_dropout(x, 0.1, True),
        "sum_dim0": lambda: x.sum(0),
        "layer_norm": lambda: F.layer_norm(x, (64,), b, b),
        "softmax": lambda: torch.softmax(x, -1),
        "t": lambda: x.t(),
        "view": lambda: x.view(16, 256),
        "transpose": lambda: x.transpose(0, 1),
        "index_copy_": lambda: cache.index_copy_(0, idx, row),
    }
    q = torch.randn(1, 4, 64, 64, device=dev, dtype=bf)
    ops["sdpa"] = lambda: F.scaled_dot_product_attention(q, q, q, is_causal=True)
    for name, fn in ops.items():
        fn()
        timings.add({"bench": "eager_op", "op": name}, host_us_per_op=(fn, 300))
    # autograd: forward + backward of a chain of N gelu ops; slope over N minus the forward slope
    xs = torch.randn(64, 64, device=dev, dtype=bf, requires_grad=True)
    g = torch.randn(64, 64, device=dev, dtype=bf)

    def chain(n: int, backward: bool) -> Any:
        def fn() -> None:
            y = xs
            for _ in range(n):
                y = F.gelu(y)
            if backward:
                y.backward(g)
                xs.grad = None
        return fn

    for n in (1, 4, 16):
        for bwd in (False, True):
            fn = chain(n, bwd)
            fn()
            timings.add({"bench": "autograd_chain", "ops": n, "backward": bwd}, host_us_per_call=(fn, 100))
    # torch.compile with K separate kernels (graph breaks between steps keep them apart)
    import torch._dynamo

    for k in (1, 3):
        def body(t: Any, k: int = k) -> Any:
            for _ in range(k):
                t = torch.sin(t) * 2.0
                t = t.contiguous().sum(0, keepdim=True) + t  # reduction + broadcast: a kernel boundary
            return t

        cf = torch.compile(body)
        t = torch.randn(64, 64, device=dev)
        for _ in range(3):
            cf(t)
        torch.cuda.synchronize()
        prof_kernels = None
        try:
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                cf(t)
                torch.cuda.synchronize()
            prof_kernels = sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)
        except Exception as exc:  # noqa: BLE001 - recorded, not fatal
            prof_kernels = f"profiler failed: {exc}"
        timings.add({"bench": "compiled_call", "blocks": k, "kernels_per_call": prof_kernels},
                    host_us_per_call=(lambda cf=cf, t=t: cf(t), 200))
    # torch.compile training path: a chain of k matmuls is k extern (cuBLAS) kernels forward and
    # 2k backward; host time per forward call and per forward+backward step, for k = 1 and 4.
    for k in (1, 4):
        ws = [torch.randn(64, 64, device=dev, requires_grad=True) for _ in range(k)]
        xin = torch.randn(64, 64, device=dev, requires_grad=True)

        def chain_fn(x: Any, *w: Any) -> Any:
            for wi in w:
                x = x @ wi
            return x

        cf = torch.compile(chain_fn)
        go = torch.randn(64, 64, device=dev)

        def fwd_only(cf: Any = cf, ws: Any = ws, xin: Any = xin) -> None:
            with torch.no_grad():
                cf(xin, *ws)

        def train(cf: Any = cf, ws: Any = ws, xin: Any = xin, go: Any = go) -> None:
            cf(xin, *ws).backward(go)
            for t in [xin, *ws]:
                t.grad = None

        for _ in range(3):
            fwd_only()
            train()
        torch.cuda.synchronize()
        def eager_step(ws: Any = ws, xin: Any = xin, go: Any = go) -> None:
            chain_fn(xin, *ws).backward(go)
            for t in [xin, *ws]:
                t.grad = None

        timings.add({"bench": "compiled_chain", "matmuls": k}, forward_host_us=(fwd_only, 200),
                    train_step_host_us=(train, 100), eager_train_step_host_us=(eager_step, 100))
    # A custom autograd.Function launching one Triton kernel forward and one backward.
    try:
        from . import triton_kernels as K

        class OneKernel(torch.autograd.Function):
            @staticmethod
            def forward(ctx: Any, t: Any) -> Any:
                K.launch_empty(t)
                return t.view_as(t)

            @staticmethod
            def backward(ctx: Any, g: Any) -> Any:
                K.launch_empty(g)
                return g

        ta = torch.randn(64, 64, device=dev, requires_grad=True)
        gb = torch.randn(64, 64, device=dev)

        def fn_step() -> None:
            OneKernel.apply(ta).backward(gb)
            ta.grad = None

        fn_step()
        timings.add({"bench": "autograd_function"}, host_us_per_step=(fn_step, 200))
    except Exception as exc:  # noqa: BLE001 - recorded, not fatal
        records.append({"bench": "autograd_function", "error": str(exc)})
    structure_costs(timings)
    records += timings.measure(runs)
    doc = common.write_group(out_dir, "host_costs", records, "sim.calibrate.gpu.host_costs")
    return doc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", required=True)
    ap.add_argument("--runs", type=int, default=3, help="rounds of timings (the fit takes medians over them)")
    ns = ap.parse_args()
    if ns.runs < 1:
        ap.error("--runs must be at least 1")
    run(ns.out, ns.runs)
    return 0



# ----------------------------------------------------------------------------- workload-structure costs
# Host costs the transformer and decode workloads contain but the profile does not price yet
# (workloads/transformer_block.yaml, workloads/decode_step.yaml list them).


def structure_costs(timings: Timings) -> None:
    """nn.Module __call__ overhead, autograd's recording of a forward op, a Linear on a 3-D input,
    and torch.compile'd module training steps as the module's parameter count grows."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    dev, bf = "cuda", torch.bfloat16
    x = torch.randn(64, 64, device=dev, dtype=bf)
    x3 = torch.randn(2, 32, 64, device=dev, dtype=bf)

    class Identity(nn.Module):
        def forward(self, t: Any) -> Any:
            return t

    ident = Identity()
    lin = nn.Linear(64, 64, device=dev, dtype=bf)
    lin.requires_grad_(False)
    cases = {
        "module_call": lambda: ident(x),           # less a plain Python call: the __call__ machinery
        "python_call": lambda: ident.forward(x),
        "linear_module_3d": lambda: lin(x3),        # module call + view/t/addmm/view
        "linear_functional_2d": lambda: F.linear(x, lin.weight, lin.bias),
    }
    xg = torch.randn(64, 64, device=dev, dtype=bf, requires_grad=True)
    cases["gelu_recorded"] = lambda: F.gelu(xg)   # forward op that records an autograd node
    cases["gelu_plain"] = lambda: F.gelu(x)
    for name, fn in cases.items():
        fn()
        timings.add({"bench": "structure_op", "op": name}, host_us_per_op=(fn, 300))
    # torch.compile'd training step of a stack of n Linear+GELU layers: host time per step vs the
    # number of parameters (guards, runtime wrappers, AccumulateGrad per leaf, Triton launches).
    for n in (1, 4, 8):
        stack = nn.Sequential(*[nn.Sequential(nn.Linear(64, 64), nn.GELU()) for _ in range(n)]).to(dev, bf)
        cf = torch.compile(stack, dynamic=False)
        xin = torch.randn(64, 64, device=dev, dtype=bf, requires_grad=True)
        go = torch.randn(64, 64, device=dev, dtype=bf)

        def step(cf: Any = cf, stack: Any = stack, xin: Any = xin, go: Any = go) -> None:
            cf(xin).backward(go)
            stack.zero_grad(set_to_none=True)
            xin.grad = None

        def eager_step(stack: Any = stack, xin: Any = xin, go: Any = go) -> None:
            stack(xin).backward(go)
            stack.zero_grad(set_to_none=True)
            xin.grad = None

        for _ in range(3):
            step()
            eager_step()
        torch.cuda.synchronize()
        timings.add({"bench": "compiled_module_step", "layers": n, "parameters": 2 * n},
                    train_step_host_us=(step, 100), eager_train_step_host_us=(eager_step, 100))


if __name__ == "__main__":
    raise SystemExit(main())
