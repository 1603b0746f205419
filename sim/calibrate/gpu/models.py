"""The example models, one definition each: what the GPU harness measures and what
`sim.capture.examples` captures (so a capture's prediction and the measured step are of the
same model).

- workload A as a module (`bias_gelu_dropout_mlp_class`): the harness times A as the bare
  function sim.calibrate.gpu.workloads.MLP.forward_eager (no module); this is the same
  expression in an nn.Module, so a capture can run it and name its parts,
- workload B's pre-LN transformer block (`transformer_block_class`) and C's KV-cache decoder
  (`decoder_class`), measured by sim.calibrate.gpu.validate,
- the GPT, Llama and residual MLP measured in context by sim.calibrate.gpu.host_context
  (`host_context_models`).

Only torch, imported inside the functions: the harness runs this on the device with torch alone,
and kernelsim imports it without torch.
"""

from __future__ import annotations

from typing import Any


def bias_gelu_dropout_mlp_class() -> Any:
    """Workload A as a module (for a capture): y = dropout(gelu(x @ W1 + b1)) @ W2. The bias,
    GELU and dropout sit in one submodule, `act`, so a scenario can fuse them by module path."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    class BiasGeluDropout(nn.Module):
        def __init__(self, ffn: int, p: float) -> None:
            super().__init__()
            self.bias = nn.Parameter(torch.empty(ffn))
            self.drop = nn.Dropout(p)

        def forward(self, h: Any) -> Any:
            return self.drop(F.gelu(h + self.bias, approximate="none"))

    class BiasGeluDropoutMLP(nn.Module):
        def __init__(self, hidden: int = 4096, ffn: int = 16384, p: float = 0.1) -> None:
            super().__init__()
            self.w1 = nn.Parameter(torch.empty(hidden, ffn))
            self.act = BiasGeluDropout(ffn, p)
            self.w2 = nn.Parameter(torch.empty(ffn, hidden))

        def forward(self, x: Any) -> Any:
            return self.act(x @ self.w1) @ self.w2

    return BiasGeluDropoutMLP


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


def host_context_models() -> dict[str, Any]:
    """host_context's models by name: gpt (with a KV-cache `decode`), llama, mlp."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    class Block(nn.Module):
        def __init__(self, d: int, h: int, ff: int) -> None:
            super().__init__()
            self.h, self.dh = h, d // h
            self.ln1 = nn.LayerNorm(d)
            self.qkv = nn.Linear(d, 3 * d)
            self.proj = nn.Linear(d, d)
            self.ln2 = nn.LayerNorm(d)
            self.fc1 = nn.Linear(d, ff)
            self.fc2 = nn.Linear(ff, d)

        def forward(self, x: Any) -> Any:
            B, S, D = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(B, S, 3, self.h, self.dh).permute(2, 0, 3, 1, 4).unbind(0)
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(o.transpose(1, 2).reshape(B, S, D))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

        def decode(self, x: Any, kc: Any, vc: Any, pos: Any, L: int) -> Any:
            B, S, D = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(B, 1, 3, self.h, self.dh).permute(2, 0, 3, 1, 4).unbind(0)
            kc.index_copy_(2, pos, k)
            vc.index_copy_(2, pos, v)
            o = F.scaled_dot_product_attention(q, kc[:, :, :L], vc[:, :, :L])
            x = x + self.proj(o.transpose(1, 2).reshape(B, 1, D))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    class GPT(nn.Module):
        def __init__(self, vocab: int = 8192, d: int = 1024, h: int = 16, ff: int = 4096, layers: int = 4,
                     max_seq: int = 2048) -> None:
            super().__init__()
            self.tok = nn.Embedding(vocab, d)
            self.pos = nn.Embedding(max_seq, d)
            self.blocks = nn.ModuleList([Block(d, h, ff) for _ in range(layers)])
            self.ln_f = nn.LayerNorm(d)
            self.head = nn.Linear(d, vocab, bias=False)
            self.h, self.dh = h, d // h

        def forward(self, idx: Any) -> Any:
            B, S = idx.shape
            x = self.tok(idx) + self.pos(torch.arange(S, device=idx.device))
            for b in self.blocks:
                x = b(x)
            return self.head(self.ln_f(x))

        def decode(self, idx: Any, caches: list[tuple[Any, Any]], pos: Any, L: int) -> Any:
            x = self.tok(idx) + self.pos(pos).unsqueeze(0)
            for b, (kc, vc) in zip(self.blocks, caches, strict=True):
                x = b.decode(x, kc, vc, pos, L)
            return self.head(self.ln_f(x))

    class Rotary(nn.Module):
        def __init__(self, dh: int, max_seq: int = 2048) -> None:
            super().__init__()
            inv = 1.0 / (10000 ** (torch.arange(0, dh, 2).float() / dh))
            t = torch.arange(max_seq).float()
            f = torch.outer(t, inv)
            emb = torch.cat((f, f), dim=-1)
            self.register_buffer("cos", emb.cos(), persistent=False)
            self.register_buffer("sin", emb.sin(), persistent=False)

        def forward(self, x: Any) -> Any:  # x [B, h, S, dh]
            S = x.shape[2]
            c, s = self.cos[:S].to(x.dtype), self.sin[:S].to(x.dtype)
            x1, x2 = x.chunk(2, dim=-1)
            return x * c + torch.cat((-x2, x1), dim=-1) * s

    class LlamaBlock(nn.Module):
        def __init__(self, d: int, h: int, ff: int) -> None:
            super().__init__()
            self.h, self.dh = h, d // h
            self.n1 = nn.RMSNorm(d)
            self.wq = nn.Linear(d, d, bias=False)
            self.wk = nn.Linear(d, d, bias=False)
            self.wv = nn.Linear(d, d, bias=False)
            self.wo = nn.Linear(d, d, bias=False)
            self.rot = Rotary(d // h)
            self.n2 = nn.RMSNorm(d)
            self.w1 = nn.Linear(d, ff, bias=False)
            self.w3 = nn.Linear(d, ff, bias=False)
            self.w2 = nn.Linear(ff, d, bias=False)

        def forward(self, x: Any) -> Any:
            B, S, D = x.shape
            y = self.n1(x)
            q = self.rot(self.wq(y).view(B, S, self.h, self.dh).transpose(1, 2))
            k = self.rot(self.wk(y).view(B, S, self.h, self.dh).transpose(1, 2))
            v = self.wv(y).view(B, S, self.h, self.dh).transpose(1, 2)
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.wo(o.transpose(1, 2).reshape(B, S, D))
            y = self.n2(x)
            return x + self.w2(F.silu(self.w1(y)) * self.w3(y))

    class Llama(nn.Module):
        def __init__(self, vocab: int = 8192, d: int = 1024, h: int = 8, ff: int = 2816, layers: int = 4) -> None:
            super().__init__()
            self.tok = nn.Embedding(vocab, d)
            self.blocks = nn.ModuleList([LlamaBlock(d, h, ff) for _ in range(layers)])
            self.norm = nn.RMSNorm(d)
            self.head = nn.Linear(d, vocab, bias=False)

        def forward(self, idx: Any) -> Any:
            x = self.tok(idx)
            for b in self.blocks:
                x = b(x)
            return self.head(self.norm(x))

    class MLP(nn.Module):
        def __init__(self, d: int = 1024, layers: int = 4) -> None:
            super().__init__()
            self.fc1 = nn.ModuleList([nn.Linear(d, 4 * d) for _ in range(layers)])
            self.fc2 = nn.ModuleList([nn.Linear(4 * d, d) for _ in range(layers)])

        def forward(self, x: Any) -> Any:
            for a, b in zip(self.fc1, self.fc2, strict=True):
                x = x + b(F.gelu(a(x)))
            return x

    return {"gpt": GPT, "llama": Llama, "mlp": MLP}
