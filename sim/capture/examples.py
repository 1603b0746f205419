"""Example capture factories: `kernelsim capture sim.capture.examples:NAME --param k=v -o out.yaml`.

Each factory takes the workload's parameters as keyword arguments and returns what one step
runs (sim.capture.record.Step, or a dict of its fields). The models are defined once, in
sim/calibrate/gpu/models.py, which the GPU harness measures: the validation workloads that the
shipped hand-written workloads describe (workloads/mlp_bias_gelu_dropout.yaml,
transformer_block.yaml, decode_step.yaml) and the GPT, Llama and MLP measured in context. Needs
torch; the capture builds them on the meta device, so no weights are allocated.
"""

from __future__ import annotations

from typing import Any


def _models() -> Any:
    import importlib

    # imported by name: sim/calibrate/gpu is GPU-side code, outside the type-checked package
    return importlib.import_module("sim.calibrate.gpu.models")


def mlp(tokens: int = 4096, hidden: int = 4096, ffn: int = 16384, p: float = 0.1) -> dict[str, Any]:
    """workloads/mlp_bias_gelu_dropout.yaml (validation workload A): y = dropout(gelu(x @ W1 + b1)) @ W2;
    y.backward(gy). The bias, GELU and dropout sit in one submodule, `act`."""
    import torch

    model = _models().bias_gelu_dropout_mlp_class()(hidden, ffn, p).to(torch.bfloat16)
    x = torch.empty(tokens, hidden, dtype=torch.bfloat16, requires_grad=True)
    return {"model": model, "inputs": (x,)}


def transformer_block(batch: int = 4, seq: int = 1024, d: int = 2048, heads: int = 16,
                      ffn: int = 8192) -> dict[str, Any]:
    """workloads/transformer_block.yaml (validation workload B): the block the harness measures,
    its forward and y.backward(gy), bf16, no optimizer."""
    import torch

    model = _models().transformer_block_class()(d, heads, ffn).to(torch.bfloat16)
    x = torch.empty(batch, seq, d, dtype=torch.bfloat16, requires_grad=True)
    return {"model": model, "inputs": (x,)}


def gpt(batch: int = 8, seq: int = 512, layers: int = 2, d: int = 1024, heads: int = 16, ffn: int = 4096,
        vocab: int = 32000, max_seq: int = 2048) -> dict[str, Any]:
    """A GPT (host_context's: token + position embeddings, `layers` pre-LN blocks, final LayerNorm,
    LM head), cross-entropy loss, backward and a foreach AdamW step; bf16 weights."""
    import torch

    model = _models().host_context_models()["gpt"](vocab=vocab, d=d, h=heads, ff=ffn, layers=layers,
                                                   max_seq=max_seq).to(torch.bfloat16)
    idx = torch.zeros(batch, seq, dtype=torch.int64)
    target = torch.zeros(batch * seq, dtype=torch.int64)

    def loss(logits: Any) -> Any:
        return torch.nn.functional.cross_entropy(logits.view(-1, vocab), target)

    return {"model": model, "inputs": (idx,), "loss": loss,
            "optimizer": lambda ps: torch.optim.AdamW(ps, lr=1e-4, foreach=True)}


def decode(batch: int = 8, cache_len: int = 512, layers: int = 4, d: int = 2048, heads: int = 16,
           ffn: int = 8192) -> dict[str, Any]:
    """workloads/decode_step.yaml (validation workload C): one step of the harness's `layers`-layer
    decoder with a static KV cache of 2 x cache_len positions (index_copy_ of the new token at
    cache_len - 1, SDPA over the first cache_len), eval, no_grad."""
    import torch

    model = _models().decoder_class()(layers, d, heads, ffn).to(torch.bfloat16)
    hd = d // heads
    caches = [(torch.empty(batch, heads, 2 * cache_len, hd, dtype=torch.bfloat16),
               torch.empty(batch, heads, 2 * cache_len, hd, dtype=torch.bfloat16)) for _ in range(layers)]
    x = torch.empty(batch, 1, d, dtype=torch.bfloat16)
    pos = torch.zeros(1, dtype=torch.int64)
    return {"model": model, "inputs": (x,), "train": False,
            "forward": lambda m, x: m(x, caches, pos, cache_len)}


# -- the models measured on an H200 in context (sim/calibrate/gpu/host_context.py; records in
# calibration/h200/host_context/*/host_context.json), captured at the measured configurations so a
# capture's prediction can be compared with the measured step (benchmarks/capture_vs_measured.py)


def _host_context_models() -> dict[str, Any]:
    models: dict[str, Any] = _models().host_context_models()
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
