"""The validation workloads, exactly as measured (the simulator's workload files mirror them).

A. MLP training step, bf16: h = x@W1; a = h + b1; g = gelu_erf(a); d = dropout(g, p); y = d@W2;
   y.backward(gy). x [T,H], W1 [H,F], b1 [F], W2 [F,H]; x, W1, b1, W2 require grad.
   Variants: eager, compiled (torch.compile default mode, dynamic=False), triton_fused
   (fused bias+gelu+dropout forward / backward kernels, bias grad = torch sum over dim 0).
B. Pre-LN transformer block training step, bf16 (see TransformerBlock).
C. Decode step of a 4-layer decoder with a static KV cache (see Decoder).
"""

from __future__ import annotations

import itertools
from typing import Any

# B's and C's models live in sim/calibrate/gpu/models.py (the capture's examples use them too)
from .models import decoder_class, transformer_block_class

__all__ = ["MLP", "decoder_class", "fused_bgd_function", "transformer_block_class"]

_SEEDS = itertools.count(1000)


def fused_bgd_function() -> Any:
    """torch.autograd.Function for dropout(gelu_erf(h + b), p) with the Triton kernels."""
    import torch

    from . import triton_kernels as K

    class FusedBiasGeluDropout(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, h: Any, b: Any, p: float, BLOCK: int, num_warps: int) -> Any:
            seed = next(_SEEDS) % (2 ** 31 - 1)
            y = torch.empty_like(h)
            K.launch_bgd_fwd(h, b, y, p, seed, BLOCK=BLOCK, num_warps=num_warps)
            ctx.save_for_backward(h, b)
            ctx.cfg = (p, seed, BLOCK, num_warps)
            return y

        @staticmethod
        def backward(ctx: Any, gy: Any) -> Any:
            h, b = ctx.saved_tensors
            p, seed, BLOCK, num_warps = ctx.cfg
            gh = torch.empty_like(h)
            K.launch_bgd_bwd(gy.contiguous(), h, b, gh, p, seed, BLOCK=BLOCK, num_warps=num_warps)
            gb = gh.view(-1, b.numel()).sum(dim=0)
            return gh, gb, None, None, None

    return FusedBiasGeluDropout


class MLP:
    """Parameters and step functions of workload A."""

    def __init__(self, T: int, H: int = 4096, F: int = 16384, p: float = 0.1, seed: int = 0) -> None:
        import torch

        g = torch.Generator(device="cuda")
        g.manual_seed(seed)
        bf = torch.bfloat16
        self.T, self.H, self.F, self.p = T, H, F, p
        self.x = torch.randn(T, H, device="cuda", dtype=bf, generator=g).requires_grad_()
        self.W1 = (torch.randn(H, F, device="cuda", generator=g) * H ** -0.5).to(bf).requires_grad_()
        self.b1 = (torch.randn(F, device="cuda", generator=g) * 0.1).to(bf).requires_grad_()
        self.W2 = (torch.randn(F, H, device="cuda", generator=g) * F ** -0.5).to(bf).requires_grad_()
        self.gy = torch.randn(T, H, device="cuda", dtype=bf, generator=g)
        self.params = [self.x, self.W1, self.b1, self.W2]

    def zero_grad(self) -> None:
        for t in self.params:
            t.grad = None

    @staticmethod
    def forward_eager(x: Any, W1: Any, b1: Any, W2: Any, p: float) -> Any:
        import torch.nn.functional as F

        h = x @ W1
        a = h + b1
        g = F.gelu(a, approximate="none")
        d = F.dropout(g, p, training=True)
        return d @ W2

    @staticmethod
    def elementwise_eager(h: Any, b1: Any, p: float) -> Any:
        import torch.nn.functional as F

        return F.dropout(F.gelu(h + b1, approximate="none"), p, training=True)

    def make_forward(self, variant: str, BLOCK: int = 1024, num_warps: int = 4) -> Any:
        """Returns fwd(x, W1, b1, W2) -> y for the variant."""
        import torch

        p = self.p
        if variant == "eager":
            return lambda x, W1, b1, W2: MLP.forward_eager(x, W1, b1, W2, p)
        if variant == "compiled":
            f = torch.compile(MLP.forward_eager, dynamic=False)
            return lambda x, W1, b1, W2: f(x, W1, b1, W2, p)
        if variant.startswith("triton_fused"):
            Fn = fused_bgd_function()
            return lambda x, W1, b1, W2: Fn.apply(x @ W1, b1, p, BLOCK, num_warps) @ W2
        raise ValueError(f"unknown MLP variant {variant!r}")

    def make_elementwise(self, variant: str, BLOCK: int = 1024, num_warps: int = 4) -> Any:
        import torch

        p = self.p
        if variant == "eager":
            return lambda h, b1: MLP.elementwise_eager(h, b1, p)
        if variant == "compiled":
            f = torch.compile(MLP.elementwise_eager, dynamic=False)
            return lambda h, b1: f(h, b1, p)
        if variant.startswith("triton_fused"):
            Fn = fused_bgd_function()
            return lambda h, b1: Fn.apply(h, b1, p, BLOCK, num_warps)
        raise ValueError(f"unknown MLP variant {variant!r}")
