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


def transformer_block_class() -> Any:
    import torch
    import torch.nn.functional as F
    from torch import nn

    class TransformerBlock(nn.Module):
        """Pre-LN block: x + proj(SDPA_causal(qkv(ln1(x)))) then + fc2(gelu_erf(fc1(ln2(.)))).
        Linear layers have bias; no dropout; bf16 parameters."""

        def __init__(self, d_model: int = 2048, n_heads: int = 16, d_ff: int = 8192) -> None:
            super().__init__()
            self.d, self.h, self.dh = d_model, n_heads, d_model // n_heads
            self.ln1 = nn.LayerNorm(d_model)
            self.qkv = nn.Linear(d_model, 3 * d_model)
            self.proj = nn.Linear(d_model, d_model)
            self.ln2 = nn.LayerNorm(d_model)
            self.fc1 = nn.Linear(d_model, d_ff)
            self.fc2 = nn.Linear(d_ff, d_model)

        def forward(self, x: Any) -> Any:
            B, S, D = x.shape
            qkv = self.qkv(self.ln1(x)).view(B, S, 3, self.h, self.dh).permute(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(o.transpose(1, 2).reshape(B, S, D))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="none"))

    _ = torch
    return TransformerBlock


def decoder_class() -> Any:
    import torch
    import torch.nn.functional as F
    from torch import nn

    class DecoderLayer(nn.Module):
        def __init__(self, d_model: int, n_heads: int, d_ff: int) -> None:
            super().__init__()
            self.d, self.h, self.dh = d_model, n_heads, d_model // n_heads
            self.ln1 = nn.LayerNorm(d_model)
            self.qkv = nn.Linear(d_model, 3 * d_model)
            self.proj = nn.Linear(d_model, d_model)
            self.ln2 = nn.LayerNorm(d_model)
            self.fc1 = nn.Linear(d_model, d_ff)
            self.fc2 = nn.Linear(d_ff, d_model)

        def forward(self, x: Any, k_cache: Any, v_cache: Any, pos: Any, L: int) -> Any:
            B = x.shape[0]
            qkv = self.qkv(self.ln1(x)).view(B, 1, 3, self.h, self.dh)
            q, k, v = (t.transpose(1, 2) for t in qkv.unbind(2))  # [B, h, 1, dh]
            k_cache.index_copy_(2, pos, k)
            v_cache.index_copy_(2, pos, v)
            o = F.scaled_dot_product_attention(q, k_cache[:, :, :L], v_cache[:, :, :L])
            x = x + self.proj(o.transpose(1, 2).reshape(B, 1, self.d))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="none"))

    class Decoder(nn.Module):
        """n_layers DecoderLayers; KV cache [B, heads, Lmax, head_dim] per layer, preallocated.
        One step: token x [B, 1, d_model]; its k/v are written at position pos = L-1 with
        index_copy_; attention (SDPA, q_len 1, no mask) reads cache[:, :, :L]."""

        def __init__(self, n_layers: int = 4, d_model: int = 2048, n_heads: int = 16, d_ff: int = 8192) -> None:
            super().__init__()
            self.layers = nn.ModuleList([DecoderLayer(d_model, n_heads, d_ff) for _ in range(n_layers)])
            self.n_heads, self.dh = n_heads, d_model // n_heads

        def alloc_cache(self, B: int, Lmax: int) -> list[tuple[Any, Any]]:
            p = next(self.parameters())
            return [(torch.randn(B, self.n_heads, Lmax, self.dh, device=p.device, dtype=p.dtype),
                     torch.randn(B, self.n_heads, Lmax, self.dh, device=p.device, dtype=p.dtype))
                    for _ in self.layers]

        def forward(self, x: Any, caches: list[tuple[Any, Any]], pos: Any, L: int) -> Any:
            for layer, (kc, vc) in zip(self.layers, caches, strict=True):
                x = layer(x, kc, vc, pos, L)
            return x

    return Decoder
