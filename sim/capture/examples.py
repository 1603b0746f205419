"""Example capture factories: `kernelsim capture sim.capture.examples:NAME --param k=v -o out.yaml`.

Each factory takes the workload's parameters as keyword arguments and returns what one step
runs (sim.capture.record.Step, or a dict of its fields). The models are the ones the shipped
hand-written workloads describe (workloads/mlp_bias_gelu_dropout.yaml, transformer_block.yaml,
decode_step.yaml), plus a small GPT with an AdamW step. Needs torch; the capture builds them on
the meta device, so no weights are allocated.
"""

from __future__ import annotations

from typing import Any


def mlp(tokens: int = 4096, hidden: int = 4096, ffn: int = 16384, p: float = 0.1) -> dict[str, Any]:
    """workloads/mlp_bias_gelu_dropout.yaml: y = dropout(gelu(x @ W1 + b1)) @ W2; y.backward(gy).
    The bias, GELU and dropout sit in one submodule, `act`, so a scenario can fuse them by path."""
    import torch

    nn = torch.nn

    class BiasGeluDropout(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bias = nn.Parameter(torch.empty(ffn, dtype=torch.bfloat16))
            self.drop = nn.Dropout(p)

        def forward(self, h: Any) -> Any:
            return self.drop(nn.functional.gelu(h + self.bias))

    class MLP(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w1 = nn.Parameter(torch.empty(hidden, ffn, dtype=torch.bfloat16))
            self.act = BiasGeluDropout()
            self.w2 = nn.Parameter(torch.empty(ffn, hidden, dtype=torch.bfloat16))

        def forward(self, x: Any) -> Any:
            return self.act(x @ self.w1) @ self.w2

    x = torch.empty(tokens, hidden, dtype=torch.bfloat16, requires_grad=True)
    return {"model": MLP(), "inputs": (x,)}


class _Block:
    """A pre-LayerNorm transformer block (qkv Linear, SDPA, out Linear, GELU MLP)."""

    @staticmethod
    def make(d: int, heads: int, ffn: int, causal: bool = True) -> Any:
        import torch

        nn = torch.nn

        class Attention(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.qkv = nn.Linear(d, 3 * d)
                self.proj = nn.Linear(d, d)

            def forward(self, x: Any) -> Any:
                b, s, _ = x.shape
                qkv = self.qkv(x).view(b, s, 3, heads, d // heads).permute(2, 0, 3, 1, 4)
                q, k, v = qkv[0], qkv[1], qkv[2]
                o = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
                return self.proj(o.transpose(1, 2).reshape(b, s, d))

        class MLP(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.fc1 = nn.Linear(d, ffn)
                self.fc2 = nn.Linear(ffn, d)

            def forward(self, x: Any) -> Any:
                return self.fc2(nn.functional.gelu(self.fc1(x)))

        class Block(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.ln1 = nn.LayerNorm(d)
                self.attn = Attention()
                self.ln2 = nn.LayerNorm(d)
                self.mlp = MLP()

            def forward(self, x: Any) -> Any:
                x = x + self.attn(self.ln1(x))
                return x + self.mlp(self.ln2(x))

        return Block()


def transformer_block(batch: int = 4, seq: int = 1024, d: int = 2048, heads: int = 16,
                      ffn: int = 8192) -> dict[str, Any]:
    """workloads/transformer_block.yaml: one block's forward and y.backward(gy), bf16, no optimizer."""
    import torch

    model = _Block.make(d, heads, ffn).to(torch.bfloat16)
    x = torch.empty(batch, seq, d, dtype=torch.bfloat16, requires_grad=True)
    return {"model": model, "inputs": (x,)}


def gpt(batch: int = 8, seq: int = 512, layers: int = 2, d: int = 1024, heads: int = 16, ffn: int = 4096,
        vocab: int = 32000, max_seq: int = 2048) -> dict[str, Any]:
    """A small GPT: token + position embeddings, `layers` blocks, final LayerNorm, LM head,
    cross-entropy loss, backward and a foreach AdamW step; bf16 weights."""
    import torch

    nn = torch.nn

    class GPT(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.tok = nn.Embedding(vocab, d)
            self.pos = nn.Embedding(max_seq, d)
            self.layers = nn.ModuleList([_Block.make(d, heads, ffn) for _ in range(layers)])
            self.ln_f = nn.LayerNorm(d)
            self.head = nn.Linear(d, vocab, bias=False)

        def forward(self, idx: Any) -> Any:
            pos = torch.arange(idx.shape[1], device=idx.device)
            x = self.tok(idx) + self.pos(pos)
            for layer in self.layers:
                x = layer(x)
            return self.head(self.ln_f(x))

    model = GPT().to(torch.bfloat16)
    idx = torch.zeros(batch, seq, dtype=torch.int64)
    target = torch.zeros(batch * seq, dtype=torch.int64)

    def loss(logits: Any) -> Any:
        return nn.functional.cross_entropy(logits.view(-1, vocab), target)

    return {"model": model, "inputs": (idx,), "loss": loss,
            "optimizer": lambda ps: torch.optim.AdamW(ps, lr=1e-4, foreach=True)}


def decode(batch: int = 8, cache_len: int = 512, layers: int = 4, d: int = 2048, heads: int = 16,
           ffn: int = 8192) -> dict[str, Any]:
    """workloads/decode_step.yaml: one decode step of a `layers`-layer decoder with a static KV
    cache (index_copy_ of the new token, SDPA over the first cache_len positions), eval, no_grad."""
    import torch

    nn = torch.nn
    hd = d // heads

    class Layer(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln1 = nn.LayerNorm(d)
            self.qkv = nn.Linear(d, 3 * d)
            self.proj = nn.Linear(d, d)
            self.ln2 = nn.LayerNorm(d)
            self.fc1 = nn.Linear(d, ffn)
            self.fc2 = nn.Linear(ffn, d)
            self.register_buffer("k_cache", torch.empty(batch, heads, cache_len, hd))
            self.register_buffer("v_cache", torch.empty(batch, heads, cache_len, hd))

        def forward(self, x: Any, pos: Any) -> Any:
            b = x.shape[0]
            q, k, v = self.qkv(self.ln1(x)).view(b, 1, 3, heads, hd).unbind(2)
            q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
            k_cache: Any = self.k_cache
            v_cache: Any = self.v_cache
            k_cache.index_copy_(2, pos, k)
            v_cache.index_copy_(2, pos, v)
            o = nn.functional.scaled_dot_product_attention(q, k_cache[:, :, :cache_len], v_cache[:, :, :cache_len])
            x = x + self.proj(o.transpose(1, 2).reshape(b, 1, d))
            return x + self.fc2(nn.functional.gelu(self.fc1(self.ln2(x))))

    class Decoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layers = nn.ModuleList([Layer() for _ in range(layers)])

        def forward(self, x: Any, pos: Any) -> Any:
            for layer in self.layers:
                x = layer(x, pos)
            return x

    model = Decoder().to(torch.bfloat16)
    x = torch.empty(batch, 1, d, dtype=torch.bfloat16)
    pos = torch.zeros(1, dtype=torch.int64)
    return {"model": model, "inputs": (x, pos), "train": False}


# -- the models measured on an H200 in context (sim/calibrate/gpu/host_context.py; records in
# calibration/h200/host_context/*/host_context.json): the same classes, captured here, so a
# capture's prediction can be compared with the measured step (benchmarks/capture_vs_measured.py)


def _host_context_models() -> dict[str, Any]:
    import importlib

    # imported by name: sim/calibrate/gpu is GPU-side code, outside the type-checked package
    module = importlib.import_module("sim.calibrate.gpu.host_context")
    models: dict[str, Any] = module._models()
    return models


def measured_gpt(batch: int = 1, seq: int = 128, vocab: int = 8192) -> dict[str, Any]:
    """host_context's gpt training step: 4 layers, d 1024, cross-entropy, AdamW(foreach=True)."""
    import torch

    model = _host_context_models()["gpt"](vocab=vocab).to(torch.bfloat16)
    idx = torch.zeros(batch, seq, dtype=torch.int64)
    tgt = torch.zeros(batch, seq, dtype=torch.int64)
    return {"model": model, "inputs": (idx,),
            "loss": lambda logits: torch.nn.functional.cross_entropy(logits.view(-1, vocab), tgt.view(-1)),
            "optimizer": lambda ps: torch.optim.AdamW(ps, lr=1e-4, foreach=True)}


def measured_llama(batch: int = 1, seq: int = 128, vocab: int = 8192) -> dict[str, Any]:
    """host_context's llama training step: RMSNorm, rotary, SwiGLU, AdamW(foreach=True)."""
    import torch

    model = _host_context_models()["llama"](vocab=vocab).to(torch.bfloat16)
    idx = torch.zeros(batch, seq, dtype=torch.int64)
    tgt = torch.zeros(batch, seq, dtype=torch.int64)
    return {"model": model, "inputs": (idx,),
            "loss": lambda logits: torch.nn.functional.cross_entropy(logits.view(-1, vocab), tgt.view(-1)),
            "optimizer": lambda ps: torch.optim.AdamW(ps, lr=1e-4, foreach=True)}


def measured_mlp(tokens: int = 128) -> dict[str, Any]:
    """host_context's mlp training step: 4 x (Linear, GELU, Linear) + residual, MSE, AdamW(foreach=True)."""
    import torch

    model = _host_context_models()["mlp"]().to(torch.bfloat16)
    x = torch.empty(tokens, 1024, dtype=torch.bfloat16)
    y = torch.empty(tokens, 1024, dtype=torch.bfloat16)
    return {"model": model, "inputs": (x,), "loss": lambda out: torch.nn.functional.mse_loss(out, y),
            "optimizer": lambda ps: torch.optim.AdamW(ps, lr=1e-4, foreach=True)}


def measured_decode(batch: int = 8, cache_len: int = 512, max_len: int = 1024) -> dict[str, Any]:
    """host_context's decode step: the gpt blocks with a KV cache, one token, eval, no_grad."""
    import torch

    model = _host_context_models()["gpt"]().to(torch.bfloat16)
    caches = [(torch.empty(batch, model.h, max_len, model.dh, dtype=torch.bfloat16),
               torch.empty(batch, model.h, max_len, model.dh, dtype=torch.bfloat16)) for _ in model.blocks]
    idx = torch.zeros(batch, 1, dtype=torch.int64)
    pos = torch.tensor([cache_len - 1])
    return {"model": model, "inputs": (idx,), "train": False,
            "forward": lambda m, i: m.decode(i, caches, pos, cache_len)}
